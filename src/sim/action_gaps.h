// The host's time between a rank's compute actions, read from a measured run: CostModel::gap (internal to the
// reader of profiler traces, where they name no schedule: schedule_waits.h reads it where they do).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dualpipe/trace/kineto.h"

namespace dualpipe {

struct ActionSpan {
  double start = 0, end = 0;
  std::string name;  // the region's, where read from a profiler trace
};
// Per rank, per step, its compute actions (in any order).
using StepActions = std::vector<std::vector<std::vector<ActionSpan>>>;

// On each rank, the gaps from one action's end to the next one's start within a step (an action that starts inside
// the previous one, a phase of it, is not one of its own). A gap is the host's work between two actions (posting
// the messages' sends and receives, the runtime's bookkeeping) and, where the next action's input had not arrived,
// a wait, which the simulator times itself from the dependencies. So the host's part is read where no wait is
// likely: the lower quartile of a rank's gaps, and the median of that over the ranks. None without two actions in
// a step on any rank.
std::optional<double> host_gap_between_actions(const StepActions& actions);

// The actions among `spans`, in time order: a span that starts inside an earlier one is a part of it (a phase),
// which then lasts until the later of their ends.
std::vector<ActionSpan> top_level(std::vector<ActionSpan> spans);

// A profiler trace's actions, the regions `is_action` names, cut by its ProfilerStep regions (one step without
// any; none for a trace of several processes, whose occurrences are not one timeline).
std::vector<std::vector<ActionSpan>> steps_of(const KinetoSummary& summary,
                                              const std::function<bool(const std::string&)>& is_action);

// The same over profiler traces: the regions `is_action` names, within each ProfilerStep (one step without any).
std::optional<double> host_gap_between_actions(const std::vector<const KinetoSummary*>& ranks,
                                               const std::function<bool(const std::string&)>& is_action);

}  // namespace dualpipe
