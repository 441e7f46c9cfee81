#include "dualpipe/trace/trace_plan.h"

#include <algorithm>
#include <vector>

#include "dualpipe/schedule/text_format.h"
#include "dualpipe/schedule/validate.h"
#include "dualpipe/util/error.h"

namespace dualpipe {

int pick_step(const Trace& trace, const std::string& path, int requested, const std::string& purpose) {
  const std::vector<int> steps = trace.steps();
  DUALPIPE_REQUIRE(!steps.empty(), "trace '", path, "' holds no events to ", purpose);
  const int step = requested >= 0 ? requested : steps.back();
  if (std::find(steps.begin(), steps.end(), step) == steps.end()) {
    std::string recorded;
    for (int s : steps) recorded += detail::concat(recorded.empty() ? "" : ", ", s);
    throw InvalidArgument(detail::concat("trace '", path, "' has no step ", step, " (steps recorded: ", recorded, ")"));
  }
  return step;
}

Schedule plan_of_trace(const Trace& trace, const std::string& path, const std::string& missing_hint) {
  DUALPIPE_REQUIRE(!trace.schedule.empty(), "trace '", path, "' has no dualpipe.schedule, so ", missing_hint);
  Schedule plan;
  try {
    plan = parse_text(trace.schedule);
    validate(plan);
  } catch (const Error& e) {
    throw InvalidArgument(detail::concat("trace '", path, "': dualpipe.schedule: ", e.what()));
  }
  plan.kind = trace.kind.empty() ? "custom" : trace.kind;
  return plan;
}

}  // namespace dualpipe
