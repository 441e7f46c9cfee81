// libFuzzer target: the trace JSON reader (parse_trace), then what compare and draw do with an accepted trace:
// its steps, the schedule in its header, the step checked against it, the fitted costs and the timeline.
#include <cstdint>
#include <string_view>

#include "dualpipe/schedule/text_format.h"
#include "dualpipe/sim/trace_costs.h"
#include "dualpipe/trace/trace.h"
#include "dualpipe/util/error.h"
#include "dualpipe/viz/trace_timeline.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const dualpipe::Trace trace = dualpipe::parse_trace(text, "fuzz.json");
    const std::vector<int> steps = trace.steps();
    if (steps.empty()) return 0;
    if (!trace.schedule.empty()) {
      try {
        const dualpipe::Schedule plan = dualpipe::parse_text(trace.schedule);
        dualpipe::check_trace_step(trace, plan, steps.back(), "fuzz.json");
      } catch (const dualpipe::Error&) {
      }
    }
    (void)dualpipe::fit_costs(trace, steps.back());
    (void)dualpipe::timeline_from_trace(trace, steps.back());
  } catch (const dualpipe::Error&) {
  }
  return 0;
}
