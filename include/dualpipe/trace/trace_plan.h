// What `dualpipe compare`, `plan --from-trace` and `draw --trace` read from a trace: the step to look at and the
// plan the trace names (its dualpipe.schedule). Errors name the trace file.
#pragma once

#include <string>

#include "dualpipe/schedule/schedule.h"
#include "dualpipe/trace/trace.h"

namespace dualpipe {

// `requested`, or the last step recorded when it is negative. Throws InvalidArgument when the trace holds no
// events ("holds no events to <purpose>") or not that step (listing the steps it has).
int pick_step(const Trace& trace, const std::string& path, int requested, const std::string& purpose);

// The trace's dualpipe.schedule, parsed and validated, with the trace's kind ("custom" when it names none).
// Throws InvalidArgument when it has none (the message ends with `missing_hint`) or it is invalid.
Schedule plan_of_trace(const Trace& trace, const std::string& path, const std::string& missing_hint);

}  // namespace dualpipe
