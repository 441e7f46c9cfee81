// Reading a schedule from a file (`--from FILE`): the whole file within ScheduleReadLimits::max_bytes (a
// device such as /dev/zero is cut off at the limit, not read to the end), the text form or, for a name ending
// in .csv, PyTorch's compute-only CSV. Errors name the path.
#pragma once

#include <string>

#include "dualpipe/schedule.h"
#include "dualpipe/schedule_limits.h"

namespace dualpipe {

// Reads at most max_bytes of `path`; throws InvalidArgument naming the path, the limit and what it holds
// ("'f.txt' is larger than the 64 MiB limit for schedule files") when there is more or it cannot be read.
std::string read_file_within(const std::string& path, std::size_t max_bytes, const std::string& what);

// The schedule in `path`, parsed (with contiguous_indices on) but not validated (call validate()).
Schedule read_schedule_file(const std::string& path, ScheduleReadLimits limits = {});

}  // namespace dualpipe
