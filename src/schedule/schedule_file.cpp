#include "dualpipe/schedule_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "dualpipe/error.h"
#include "dualpipe/pytorch_csv.h"
#include "dualpipe/text_format.h"

namespace dualpipe {

std::string read_file_within(const std::string& path, std::size_t max_bytes, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  DUALPIPE_REQUIRE(in, "cannot open '", path, "' for reading: ", std::strerror(errno));
  std::string contents;
  char buffer[1 << 16];
  // Read in pieces and stop one byte past the limit: the size a file reports says nothing for a pipe or a
  // device such as /dev/zero, which never ends.
  while (in) {
    in.read(buffer, sizeof buffer);
    const auto n = static_cast<std::size_t>(in.gcount());
    DUALPIPE_REQUIRE(contents.size() + n <= max_bytes, "'", path, "' is larger than the limit of ", max_bytes,
                     " bytes (", describe_bytes(static_cast<double>(max_bytes)), ") for ", what);
    contents.append(buffer, n);
  }
  DUALPIPE_REQUIRE(!in.bad(), "cannot read '", path, "'");
  return contents;
}

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
