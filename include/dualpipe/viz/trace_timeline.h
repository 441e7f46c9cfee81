// A step of a measured run as a timeline, for `dualpipe draw --trace` and `dualpipe compare`.
#pragma once

#include "dualpipe/trace/trace.h"
#include "dualpipe/viz/timeline.h"

namespace dualpipe {

// One step of a measured run as a timeline in microseconds, starting at 0: a row per rank, its compute
// events in index order and its spans of that step. Directions come from the trace's schedule when it has one.
Timeline timeline_from_trace(const Trace& trace, int step);

}  // namespace dualpipe
