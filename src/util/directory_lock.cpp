#include "dualpipe/util/directory_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <string>

#include "dualpipe/util/error.h"

namespace dualpipe {
namespace {

std::string holder_text(int fd) {
  char text[512];
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  std::string holder(text, n > 0 ? static_cast<size_t>(n) : 0);
  while (!holder.empty() && holder.back() == '\n') holder.pop_back();
  return holder.empty() ? "a process that has not written its name yet" : holder;
}

std::string this_process(const std::string& what) {
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  char since[32] = "?";
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  if (::gmtime_r(&now, &utc)) std::strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return detail::concat(what, ", pid ", ::getpid(), " on ", host, " since ", since, "\n");
}

}  // namespace

DirectoryLock::DirectoryLock(const std::string& dir, const std::string& option, const std::string& what) {
  const std::string path = dir + "/.lock";
  // Not inherited by programs this one starts: the lock is the holder's alone.
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  DUALPIPE_REQUIRE(fd_ >= 0, option, " '", dir, "': cannot open its lock file ", path, ": ", std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string holder = error == EWOULDBLOCK ? holder_text(fd_) : "";
    ::close(fd_);
    DUALPIPE_REQUIRE(error != EWOULDBLOCK, option, " '", dir, "' is in use by another job: ", holder,
                     " holds ", path, " (wait for it to end, or choose another directory)");
    throw InvalidArgument(detail::concat(option, " '", dir, "': cannot lock ", path, ": ", std::strerror(error)));
  }
  // The holder's name, for the message of a refused job. Should it fail to be written, the lock still holds and a
  // refused job says less about its holder, nothing worse: the results are not checked.
  const std::string me = this_process(what);
  (void)!::ftruncate(fd_, 0);
  (void)!::pwrite(fd_, me.data(), me.size(), 0);
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace dualpipe
