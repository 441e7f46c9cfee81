// `dualpipe plot`: a picture (SVG) of a training run from the metrics file `dualpipe train --metrics` writes:
// loss per step with the validation loss and the unigram baseline, and tokens per second (docs/plot.md).
#include <cctype>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "dualpipe/trace/metrics_log.h"
#include "dualpipe/util/atomic_file.h"
#include "dualpipe/util/error.h"
#include "dualpipe/util/output_paths.h"
#include "dualpipe/viz/metrics_plot.h"

namespace dualpipe::cli {
namespace {

struct PlotCommand {
  std::string metrics;
  std::string output = "run.svg";
  int width = 900;
};

bool ends_with_svg(const std::string& path) {
  if (path.size() < 4) return false;
  std::string ext = path.substr(path.size() - 4);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".svg";
}

void run(const PlotCommand& c) {
  DUALPIPE_REQUIRE(ends_with_svg(c.output), "output '", c.output,
                   "': plot writes SVG, so the file name must end in .svg");
  DUALPIPE_REQUIRE(c.width >= kMinMetricsPlotWidth && c.width <= kMaxMetricsPlotWidth, "--width must be from ",
                   kMinMetricsPlotWidth, " to ", kMaxMetricsPlotWidth, " pixels, got ", c.width);
  check_outputs_apart({{"--metrics", c.metrics}}, {{"-o", c.output}});
  const MetricsLog log = read_metrics_log(c.metrics);
  MetricsPlotOptions options;
  options.width = c.width;
  write_file_atomically(c.output, render_metrics_svg(log, options));

  const MetricsStep& last = log.steps.back();
  std::cout << std::fixed << std::setprecision(4) << "wrote " << c.output << " (" << log.steps.size() << " step"
            << (log.steps.size() == 1 ? "" : "s") << ", " << log.evals.size() << " evaluation" << (log.evals.size() == 1 ? "" : "s") << "): final loss "
            << last.loss << " at step " << last.step;
  if (log.unigram_baseline) {
    // Rounded as printed, so a gap of -0.00001 reads +0.0000, not -0.0000.
    const double gap = std::round((last.loss - *log.unigram_baseline) * 1e4) / 1e4 + 0.0;
    std::cout << " vs unigram baseline " << *log.unigram_baseline << " (" << (gap >= 0 ? "+" : "") << gap << ")";
  } else {
    std::cout << " (no unigram baseline in the file)";
  }
  std::cout << "\n";
}

}  // namespace

void add_plot_command(CLI::App& app) {
  auto [sub, command] = add_command<PlotCommand>(app, "plot", run,
      "Draw a training run (SVG) from its metrics file: loss per step with the validation loss and the "
      "unigram baseline, and tokens per second");
  sub->add_option("--metrics", command->metrics, "Metrics file written by 'dualpipe train --metrics'")->required();
  sub->add_option("-o,--output", command->output, "Picture file, *.svg (written whole or not at all)")
      ->capture_default_str();
  sub->add_option("--width", command->width,
                  "Picture width in pixels, " + std::to_string(kMinMetricsPlotWidth) + " to " +
                      std::to_string(kMaxMetricsPlotWidth) + " (the height is " +
                      std::to_string(kMetricsPlotHeight) + ")")
      ->capture_default_str();
  sub->footer(R"(The metrics file is the JSON lines of 'dualpipe train --metrics FILE' (docs/plot.md).
Example:
  dualpipe train --ranks 4 --steps 200 --metrics run.jsonl
  dualpipe plot --metrics run.jsonl -o run.svg)");
}

}  // namespace dualpipe::cli
