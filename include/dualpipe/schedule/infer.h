// Rebuilds a Schedule's counts and placement from bare per-rank action lists (what text and CSV files hold).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "dualpipe/schedule/schedule.h"

namespace dualpipe {

// Counts stages and micro-batches from the largest indices used and infers the placement from the rank of
// every forward. A stage may live on at most two ranks, and a micro-batch must keep one replica for all
// stages; otherwise InvalidSchedule names the stage or micro-batch. Communication peers are filled in from
// the placement. The schedule's kind is "custom".
// Checks the indices first (check_action_indices, actions located as "rank R action N").
Schedule schedule_from_actions(std::vector<std::vector<Action>> actions);

// Where the action at actions[rank][index] came from, for errors: "line 3, column 12".
using ActionLocator = std::function<std::string(std::size_t rank, std::size_t index)>;

// The checks that keep the work of inferring and validating proportional to the number of actions, whatever
// numbers they hold. Throws InvalidArgument naming the first offending action and where it is:
// - with `contiguous`, a stage (or micro-batch) index above others that no action uses: "stage 7 of '7F0'
//   (line 1, column 40) is out of range: no action uses stages 4..6", the typo that would otherwise be reported
//   as every missing action of stages 4..7;
// - (largest stage + 1) x (largest micro-batch + 1) above 4 x the (stage, micro-batch) pairs the actions name
//   + 4096: most of the schedule missing, or a number far beyond the others.
void check_action_indices(const std::vector<std::vector<Action>>& actions, const ActionLocator& where,
                          bool contiguous);

}  // namespace dualpipe
