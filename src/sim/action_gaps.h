// The host's time between a rank's compute actions, read from its profiler trace: CostModel::gap (internal to
// kineto_costs.cpp).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dualpipe/trace/kineto.h"

namespace dualpipe {

// Each rank's compute regions (those `is_action` names, outermost only) in time order, and the gaps from one's end
// to the next one's start within a ProfilerStep. A gap is the host's work between two actions (posting the
// messages' sends and receives, the runtime's bookkeeping) and, where the next action's input had not arrived,
// a wait, which the simulator times itself from the dependencies. So the host's part is read where no wait is
// likely: the lower quartile of a rank's gaps, and the median of that over the ranks. None without two actions in
// a step on any rank.
std::optional<double> host_gap_between_actions(const std::vector<const KinetoSummary*>& ranks,
                                               const std::function<bool(const std::string&)>& is_action);

}  // namespace dualpipe
