#include "dualpipe/util/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "dualpipe/util/error.h"
#include "dualpipe/util/file_input.h"

namespace dualpipe {
namespace {

// The system's reason for a failed stream operation ("No space left on device"); streams do not always set errno.
std::string reason(int error) { return error != 0 ? std::strerror(error) : "the stream reported an error"; }

// The file a write of `path` replaces: `path` itself, or the regular file a link at `path` leads to (so the link
// stays a link). A new file is written beside it and renamed over it, which must never happen to a device, a FIFO
// or a directory: renaming over /dev/full or /dev/stdout would replace the device node itself.
std::string replaced_file(const std::string& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) return path;  // a new file
  std::string target = path;
  if (S_ISLNK(info.st_mode)) {
    std::error_code error;
    const std::filesystem::path resolved = std::filesystem::canonical(path, error);
    if (error || ::stat(resolved.c_str(), &info) != 0) return path;  // a dangling link: replaced like a new file
    target = resolved.string();
  }
  DUALPIPE_REQUIRE(S_ISREG(info.st_mode), "cannot write '", path, "': it is ", file_type_name(info.st_mode),
                   ", and outputs are written to a new file renamed over the old one, so they must be regular files "
                   "(leave the option out to print to standard output where a command can)");
  return target;
}

}  // namespace

void write_file_atomically(const std::string& requested, const std::function<void(std::ostream&)>& write) {
  const std::string path = replaced_file(requested);
  // Unique per process and call, so ranks (processes or threads) writing next to each other never share one.
  static std::atomic<unsigned> counter{0};
  const std::string temporary = detail::concat(path, ".tmp.", ::getpid(), ".", counter++);
  try {
    errno = 0;
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    DUALPIPE_REQUIRE(out, "cannot open '", temporary, "' for writing (for '", path, "'): ", reason(errno));
    write(out);
    out.flush();
    DUALPIPE_REQUIRE(out, "cannot write '", path, "': ", reason(errno), " (writing its temporary '", temporary, "')");
    out.close();
    DUALPIPE_REQUIRE(!out.fail(), "cannot write '", path, "': ", reason(errno), " (closing its temporary '",
                     temporary, "')");
    // On disk before the rename, so a crash of the machine cannot leave the new name on empty contents.
    int fd = ::open(temporary.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ::fsync(fd);
      ::close(fd);
    }
    DUALPIPE_REQUIRE(std::rename(temporary.c_str(), path.c_str()) == 0, "cannot rename '", temporary, "' to '",
                     path, "': ", reason(errno));
  } catch (...) {
    std::remove(temporary.c_str());
    throw;
  }
}

void check_can_write_file(const std::string& path) {
  DUALPIPE_REQUIRE(!path.empty(), "the output file name is empty");
  (void)replaced_file(path);
  const std::string probe = detail::concat(path, ".tmp.", ::getpid(), ".probe");
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  DUALPIPE_REQUIRE(fd >= 0, "cannot write '", path, "': ", std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

void write_file_atomically(const std::string& path, const std::string& contents) {
  write_file_atomically(path, [&](std::ostream& out) { out << contents; });
}

}  // namespace dualpipe
