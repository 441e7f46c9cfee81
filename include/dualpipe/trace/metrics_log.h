// The metrics file of a training run (`dualpipe train --metrics FILE`, docs/plot.md): JSON lines, one record
// per line. A "config" record first (any fields, among them "unigram_baseline"), then "step" records (one per
// training step) and "eval" records (one per validation, step 0 = before the first step). Unknown fields and
// record types are skipped, so older readers take newer files.
//
// Reading is strict: an error names the file, the line and the problem
// ("metrics 'run.jsonl' line 7: field 'loss': expected a finite number, got null").
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dualpipe {

struct MetricsStep {
  int step = 0;               // 1 for the first training step; strictly increasing along the file
  double loss = 0;            // training loss of the step
  double tokens_per_s = 0;    // >= 0
  // Checked when present (finite; peak bytes >= 0), absent in files of other writers.
  std::optional<double> step_ms, lr, grad_norm;
  std::vector<double> peak_activation_bytes;  // per rank
};

struct MetricsEval {
  int step = 0;  // the training steps done before it: 0 = before the first step; strictly increasing
  double val_loss = 0;
};

struct MetricsLog {
  std::string source;                       // the file, as named in errors
  std::optional<double> unigram_baseline;   // from the config record, when it has one
  // The config record's fields whose values are strings, numbers or booleans, in file order, as text
  // (strings without quotes): what the plot's subtitle picks its run description from.
  std::vector<std::pair<std::string, std::string>> config;
  std::vector<MetricsStep> steps;  // at least one
  std::vector<MetricsEval> evals;

  // The config field's text, or "" when the config record has no such scalar field.
  std::string config_value(const std::string& key) const;
};

// Bounds that keep a corrupt or hostile file from exhausting memory.
constexpr std::size_t kMaxMetricsLineBytes = std::size_t{1} << 20;     // 1 MiB per line
constexpr std::size_t kMaxMetricsFileBytes = std::size_t{256} << 20;   // 256 MiB per file

// Parses the text of a metrics file; `source` names it in errors. Throws InvalidArgument.
MetricsLog parse_metrics_log(std::string_view text, const std::string& source);
// Reads and parses a metrics file; throws InvalidArgument naming the path when it cannot be read.
MetricsLog read_metrics_log(const std::string& path);

}  // namespace dualpipe
