#include "dualpipe/util/file_input.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "dualpipe/util/byte_size.h"
#include "dualpipe/util/error.h"

namespace dualpipe {

const char* file_type_name(unsigned mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

namespace {

// stat() of `path` (links followed), or an InvalidArgument naming why it cannot be had.
struct stat stat_of(const std::string& path, const std::string& label) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0) return info;
  const int error = errno;
  DUALPIPE_REQUIRE(error != ENOENT, label, " does not exist");
  DUALPIPE_REQUIRE(error != ELOOP, label, " is a loop of symbolic links");
  throw InvalidArgument(detail::concat(label, " cannot be read: ", std::strerror(error)));
}

}  // namespace

void require_regular_file(const std::string& path, const std::string& label) {
  const struct stat info = stat_of(path, label);
  DUALPIPE_REQUIRE(S_ISREG(info.st_mode), label, " is ", file_type_name(info.st_mode),
                   ", not a regular file (only regular files are read: save the input to a file first)");
}

std::string read_file_within(const std::string& path, std::size_t max_bytes, const std::string& what,
                             const std::string& given_label) {
  const std::string label = given_label.empty() ? "'" + path + "'" : given_label;
  require_regular_file(path, label);
  auto too_large = [&] {
    return detail::concat(label, " is larger than the limit of ", max_bytes, " bytes (",
                          describe_bytes(static_cast<double>(max_bytes)), ") for ", what);
  };
  DUALPIPE_REQUIRE(static_cast<std::size_t>(stat_of(path, label).st_size) <= max_bytes, too_large());
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  DUALPIPE_REQUIRE(in, "cannot open ", label, " for reading: ", std::strerror(errno));
  std::string contents;
  char buffer[1 << 16];
  // Read in pieces and stop one piece past the limit: the file may grow after its size was checked.
  while (in) {
    in.read(buffer, sizeof buffer);
    const auto n = static_cast<std::size_t>(in.gcount());
    DUALPIPE_REQUIRE(contents.size() + n <= max_bytes, too_large());
    contents.append(buffer, n);
  }
  DUALPIPE_REQUIRE(!in.bad(), "cannot read ", label, ": ", std::strerror(errno));
  return contents;
}

}  // namespace dualpipe
