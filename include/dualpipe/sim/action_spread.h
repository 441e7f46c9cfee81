// An action's time differs from one occurrence to the next, and a step waits for the slow ones on its critical path:
// a run simulated at its actions' mean times is predicted shorter than it ran (2 to 3% at two ranks with a core
// each, docs/benchmarks.md). `plan --from-kineto` (kineto_plan.cpp) replays the traced schedule with each action's
// time drawn from the spread its traces measured and takes the median step, as the measured step is the median of
// the traced steps.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "dualpipe/schedule/schedule.h"
#include "dualpipe/sim/cost_model.h"
#include "dualpipe/sim/shared_cores.h"
#include "dualpipe/trace/kineto.h"

namespace dualpipe {

// Each occurrence of a region `is_action` names, on each rank, over the mean of that region's occurrences on that
// rank: the spread of the actions' times around their costs (empty without any).
std::vector<double> action_spread(const std::vector<const KinetoSummary*>& ranks,
                                  const std::function<bool(const std::string&)>& is_action);

// The simulation whose step is the median of `draws` simulations of `schedule` on `cores` shared cores (as
// simulate_on_shared_cores), each compute action's cost times a value drawn from `spread` (a fixed seed: the same
// traces give the same prediction). One simulation at the costs where `spread` is empty or `draws` is 1.
SharedCoresStep median_of_draws(const Schedule& schedule, const CostModel& costs, int replicas, int cores,
                                const std::vector<double>& updates, const std::vector<double>& spread, int draws);

}  // namespace dualpipe
