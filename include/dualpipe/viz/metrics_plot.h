// A picture of a training run from its metrics file (metrics_log.h), as self-contained SVG: two panels on one
// step axis, (a) the training loss of every step, the validation loss (line with a marker per evaluation) and
// the unigram baseline (dashed, labelled), (b) tokens per second of every step.
//
// The series are <polyline class="series ..." data-series="loss|val_loss|tokens_per_s"> elements whose
// points are (step, value) in document order; validation markers are <circle class="marker" data-step=...
// data-value=...>; the baseline is <line class="baseline" data-value=...>. A series with more steps than
// 2 points per pixel column is thinned to the first, lowest, highest and last point of each column (so the
// drawn shape is the same); its data-steps says how many steps it stands for.
#pragma once

#include <string>

#include "dualpipe/trace/metrics_log.h"

namespace dualpipe {

constexpr int kMinMetricsPlotWidth = 600;
constexpr int kMaxMetricsPlotWidth = 4000;
constexpr int kMetricsPlotHeight = 600;

struct MetricsPlotOptions {
  int width = 900;    // pixels, kMinMetricsPlotWidth..kMaxMetricsPlotWidth; the height is kMetricsPlotHeight
  std::string title;  // empty: "training run: <source>"
};

// Throws InvalidArgument when the width is out of range or the values span more than a double can hold.
std::string render_metrics_svg(const MetricsLog& log, const MetricsPlotOptions& options = {});

}  // namespace dualpipe
