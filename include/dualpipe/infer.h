// Rebuilds a Schedule's counts and placement from bare per-rank action lists (what text and CSV files hold).
#pragma once

#include <vector>

#include "dualpipe/schedule.h"

namespace dualpipe {

// Counts stages and micro-batches from the largest indices used and infers the placement from the rank of
// every forward. A stage may live on at most two ranks, and a micro-batch must keep one replica for all
// stages; otherwise InvalidSchedule names the stage or micro-batch. Communication peers are filled in from
// the placement. The schedule's kind is "custom".
Schedule schedule_from_actions(std::vector<std::vector<Action>> actions);

}  // namespace dualpipe
