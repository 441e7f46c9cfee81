// Checks that a schedule can run: every (stage, micro-batch) gets exactly one forward and one backward
// (a full B, or an I followed by its W) on the rank the placement names, in a per-rank order whose
// dependencies can all be met. Communication actions, if present, are checked against the compute actions.
#pragma once

#include <string>
#include <vector>

#include "dualpipe/schedule/schedule.h"

namespace dualpipe {

// Every problem found, one message each, naming the rank and the action. Empty means valid.
std::vector<std::string> find_problems(const Schedule& schedule);

// Throws InvalidSchedule listing the problems (the first few) when there are any.
void validate(const Schedule& schedule);

}  // namespace dualpipe
