// Reading the metrics file of a training run (docs/plot.md). Every field used is checked, and an error names
// the file, the line and the field ("metrics 'run.jsonl' line 7: field 'loss': expected a finite number, got null").
#include "dualpipe/trace/metrics_log.h"

#include <cmath>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "dualpipe/util/error.h"
#include "dualpipe/util/file_input.h"

namespace dualpipe {
namespace {

using nlohmann::json;

constexpr long long kMaxStep = 1'000'000'000;
constexpr std::size_t kMaxConfigValueChars = 200;

class LineReader {
 public:
  LineReader(const std::string& source, std::size_t line) : source_(source), line_(line) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw InvalidArgument(detail::concat("metrics '", source_, "' line ", line_, ": ", what));
  }

  // As in the trace reader: a container is described, never printed, since dump() recurses once per level
  // of nesting (a deeply nested value overflowed the stack there) and would copy all of a large value.
  static std::string got(const json& value) {
    if (value.is_array()) return detail::concat("got an array of ", value.size(), " elements");
    if (value.is_object()) return detail::concat("got an object with ", value.size(), " fields");
    std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
    if (text.size() > 40) text = text.substr(0, 37) + "...";
    return "got " + text;
  }

  const json& field(const json& record, const char* key) const {
    const auto it = record.find(key);
    if (it == record.end()) fail(detail::concat("missing field '", key, "'"));
    return *it;
  }

  double number(const json& value, const char* key, double min = -HUGE_VAL) const {
    if (!value.is_number()) fail(detail::concat("field '", key, "': expected a number, ", got(value)));
    const double d = value.get<double>();
    if (!std::isfinite(d)) fail(detail::concat("field '", key, "': expected a finite number, ", got(value)));
    if (d < min) fail(detail::concat("field '", key, "': expected a number >= ", min, ", ", got(value)));
    return d;
  }

  int step(const json& record) const {
    const json& value = field(record, "step");
    if (!value.is_number_integer()) fail("field 'step': expected an integer, " + got(value));
    const bool in_range = value.is_number_unsigned() ? value.get<std::uint64_t>() <= std::uint64_t(kMaxStep)
                                                     : value.get<std::int64_t>() >= 0 &&
                                                           value.get<std::int64_t>() <= kMaxStep;
    if (!in_range) fail(detail::concat("field 'step': expected an integer from 0 to ", kMaxStep, ", ", got(value)));
    return static_cast<int>(value.get<std::int64_t>());
  }

  std::optional<double> optional_number(const json& record, const char* key, double min = -HUGE_VAL) const {
    const auto it = record.find(key);
    if (it == record.end()) return std::nullopt;
    return number(*it, key, min);
  }

 private:
  const std::string& source_;
  std::size_t line_;
};

// nlohmann's message without its "[json.exception...]" tag and its "line 1" (each record is parsed on its own):
// "column 12: syntax error while parsing value - invalid literal; last read: '{x'",
// "number overflow parsing '1e999'".
std::string json_problem(const json::exception& e) {
  std::string what = e.what();
  const std::size_t tag = what.find("] ");
  if (what.rfind("[json.exception.", 0) == 0 && tag != std::string::npos) what = what.substr(tag + 2);
  const std::string prefix = "parse error at line 1, ";
  if (what.rfind(prefix, 0) == 0) what = what.substr(prefix.size());
  return what;
}

bool blank(std::string_view line) {
  for (char c : line)
    if (c != ' ' && c != '\t' && c != '\r') return false;
  return true;
}

void read_config(const json& record, const LineReader& in, MetricsLog& log) {
  if (record.contains("unigram_baseline"))
    log.unigram_baseline = in.number(record["unigram_baseline"], "unigram_baseline");
  for (auto it = record.begin(); it != record.end(); ++it) {
    if (it.key() == "type" || it->is_structured() || it->is_null()) continue;
    std::string text = it->is_string() ? it->get<std::string>() : it->dump();  // a number or a boolean
    if (text.size() > kMaxConfigValueChars) text = text.substr(0, kMaxConfigValueChars - 3) + "...";
    log.config.emplace_back(it.key(), std::move(text));
  }
}

MetricsStep read_step(const json& record, const LineReader& in) {
  MetricsStep s;
  s.step = in.step(record);
  s.loss = in.number(in.field(record, "loss"), "loss");
  s.tokens_per_s = in.number(in.field(record, "tokens_per_s"), "tokens_per_s", 0);
  s.step_ms = in.optional_number(record, "step_ms", 0);
  s.lr = in.optional_number(record, "lr");
  s.grad_norm = in.optional_number(record, "grad_norm", 0);
  const auto peaks = record.find("peak_activation_bytes");
  if (peaks != record.end()) {
    if (!peaks->is_array())
      in.fail("field 'peak_activation_bytes': expected an array of byte counts, " + LineReader::got(*peaks));
    for (const json& p : *peaks) s.peak_activation_bytes.push_back(in.number(p, "peak_activation_bytes", 0));
  }
  return s;
}

}  // namespace

std::string MetricsLog::config_value(const std::string& key) const {
  for (const auto& [k, v] : config)
    if (k == key) return v;
  return "";
}

MetricsLog parse_metrics_log(std::string_view text, const std::string& source) {
  DUALPIPE_REQUIRE(text.size() <= kMaxMetricsFileBytes, "metrics '", source, "': ", text.size(),
                   " bytes is over the limit of ", kMaxMetricsFileBytes, " bytes (256 MiB) for a metrics file");
  MetricsLog log;
  log.source = source;
  std::size_t number = 0, step_line = 0, eval_line = 0;
  bool records = false;  // a step or eval record was read (the config record must come before them)
  bool config = false;
  for (std::size_t begin = 0; begin < text.size();) {
    const std::size_t newline = text.find('\n', begin);
    const std::size_t end = newline == std::string_view::npos ? text.size() : newline;
    const std::string_view line = text.substr(begin, end - begin);
    begin = end + 1;
    const LineReader in(source, ++number);
    if (line.size() > kMaxMetricsLineBytes)
      in.fail(detail::concat("the line has ", line.size(), " bytes, over the limit of ", kMaxMetricsLineBytes,
                             " bytes (1 MiB) for one record"));
    if (blank(line)) continue;

    json record;
    try {
      record = json::parse(line.begin(), line.end());
    } catch (const json::exception& e) {  // parse_error, or out_of_range for 1e999
      in.fail("not valid JSON (" + json_problem(e) + ")" +
              (newline == std::string_view::npos
                   ? "; it is the last line and has no newline: was the file still being written?"
                   : ""));
    }
    if (!record.is_object()) in.fail("expected a JSON object (one record per line), " + LineReader::got(record));
    const json& type_value = in.field(record, "type");
    if (!type_value.is_string()) in.fail("field 'type': expected a string, " + LineReader::got(type_value));
    const std::string type = type_value.get<std::string>();

    if (type == "config") {
      if (config) in.fail("a second config record: a metrics file holds one run");
      if (records) in.fail("the config record must come before the step and eval records");
      config = true;
      read_config(record, in, log);
    } else if (type == "step") {
      records = true;
      MetricsStep s = read_step(record, in);
      if (!log.steps.empty() && s.step <= log.steps.back().step)
        in.fail(detail::concat("step ", s.step, " comes after step ", log.steps.back().step, " (line ", step_line,
                               "): step records must have increasing steps"));
      log.steps.push_back(std::move(s));
      step_line = number;
    } else if (type == "eval") {
      records = true;
      MetricsEval e;
      e.step = in.step(record);
      e.val_loss = in.number(in.field(record, "val_loss"), "val_loss");
      if (!log.evals.empty() && e.step <= log.evals.back().step)
        in.fail(detail::concat("evaluation at step ", e.step, " comes after the one at step ", log.evals.back().step,
                               " (line ", eval_line, "): eval records must have increasing steps"));
      log.evals.push_back(e);
      eval_line = number;
    }
    // Any other type is a record of a newer writer: skipped.
  }
  DUALPIPE_REQUIRE(!log.steps.empty(), "metrics '", source, "': no step records in ", number,
                   " lines: nothing to plot (is it the file of `dualpipe train --metrics`?)");
  return log;
}

MetricsLog read_metrics_log(const std::string& path) {
  return parse_metrics_log(read_file_within(path, kMaxMetricsFileBytes, "a metrics file", "metrics '" + path + "'"),
                           path);
}

}  // namespace dualpipe
