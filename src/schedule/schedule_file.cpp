#include "dualpipe/schedule/schedule_file.h"


#include "dualpipe/schedule/pytorch_csv.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/util/error.h"

namespace dualpipe {

Schedule read_schedule_file(const std::string& path, ScheduleReadLimits limits) {
  limits.contiguous_indices = true;
  const std::string contents = read_file_within(path, limits.max_bytes, "schedule files");
  const bool csv = path.size() >= 4 && path.compare(path.size() - 4, 4, ".csv") == 0;
  try {
    return csv ? parse_pytorch_csv(contents, limits) : parse_text(contents, limits);
  } catch (const Error& e) {
    throw InvalidArgument(detail::concat(path, ": ", e.what()));
  }
}

}  // namespace dualpipe
