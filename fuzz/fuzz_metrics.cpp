// libFuzzer target: the metrics reader of `dualpipe plot` (parse_metrics_log) and the picture drawn from it.
#include <cstdint>
#include <string>

#include "dualpipe/trace/metrics_log.h"
#include "dualpipe/util/error.h"
#include "dualpipe/viz/metrics_plot.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const dualpipe::MetricsLog log = dualpipe::parse_metrics_log(text, "fuzz.jsonl");
    (void)dualpipe::render_metrics_svg(log, dualpipe::MetricsPlotOptions{});
  } catch (const dualpipe::Error&) {
  }
  return 0;
}
