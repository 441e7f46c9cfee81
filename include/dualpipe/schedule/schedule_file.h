// Reading a schedule from a file (`--from FILE`): the whole file within ScheduleReadLimits::max_bytes (a
// regular file only: file_input.h), the text form or, for a name ending
// in .csv, PyTorch's compute-only CSV. Errors name the path.
#pragma once

#include <string>

#include "dualpipe/schedule/schedule.h"
#include "dualpipe/schedule/schedule_limits.h"
#include "dualpipe/util/file_input.h"

namespace dualpipe {

// The schedule in `path`, parsed (with contiguous_indices on) but not validated (call validate()).
Schedule read_schedule_file(const std::string& path, ScheduleReadLimits limits = {});

}  // namespace dualpipe
