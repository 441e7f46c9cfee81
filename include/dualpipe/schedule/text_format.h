// The canonical text form of a schedule (spec section 1), one line per rank:
//   rank 0: 0F0 0F1 (0F3;7B11) 0I2 0W2
// Blank lines and lines starting with '#' are ignored when parsing. format(parse(t)) == t for canonical text.
#pragma once

#include <string>
#include <string_view>

#include "dualpipe/schedule/schedule.h"
#include "dualpipe/schedule/schedule_limits.h"

namespace dualpipe {

std::string format_text(const Schedule& schedule);

// Reads the text form. Ranks, stages and micro-batches are counted from the actions and the placement is
// inferred from where each forward runs. The result has kind "custom"; it is not validated. Input beyond
// `limits`, and indices out of range (check_action_indices), throw InvalidArgument naming the line and column.
Schedule parse_text(std::string_view text, const ScheduleReadLimits& limits = {});

}  // namespace dualpipe
