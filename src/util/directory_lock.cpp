#include "dualpipe/util/directory_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
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

// A forked child of a holder that shared its lock finds the holder's descriptor here. Locks of flock belong to the
// open file, which the fork shares: locking it again succeeds, where a new open of the file would be refused.
constexpr const char* kSharedLockVariable = "DUALPIPE_SHARED_LOCK_FD";

// The descriptor of `path`'s lock inherited from the holder that forked this process, or -1.
int shared_lock_of(const std::string& path) {
  const char* text = std::getenv(kSharedLockVariable);
  if (!text) return -1;
  char* end = nullptr;
  const long fd = std::strtol(text, &end, 10);
  struct stat shared {}, wanted {};
  if (*end != '\0' || fd < 0 || fd > INT_MAX || ::fstat(int(fd), &shared) != 0 || ::stat(path.c_str(), &wanted) != 0)
    return -1;
  if (shared.st_dev != wanted.st_dev || shared.st_ino != wanted.st_ino) return -1;
  return ::flock(int(fd), LOCK_EX | LOCK_NB) == 0 ? ::fcntl(int(fd), F_DUPFD_CLOEXEC, 0) : -1;
}

}  // namespace

DirectoryLock::DirectoryLock(const std::string& dir, const std::string& option, const std::string& what) {
  const std::string path = dir + "/.lock";
  fd_ = shared_lock_of(path);
  if (fd_ >= 0) {
    write_holder(what);
    return;
  }
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
  write_holder(what);
}

// The holder's name, for the message of a refused job. Should it fail to be written, the lock still holds and a
// refused job says less about its holder, nothing worse: the results are not checked.
void DirectoryLock::write_holder(const std::string& what) {
  const std::string me = this_process(what);
  (void)!::ftruncate(fd_, 0);
  (void)!::pwrite(fd_, me.data(), me.size(), 0);
}

void DirectoryLock::share_with_forks() const {
  // Kept open across the children's close-on-exec sweep (a forked rank closes what exec would: launch/).
  ::fcntl(fd_, F_SETFD, ::fcntl(fd_, F_GETFD) & ~FD_CLOEXEC);
  ::setenv(kSharedLockVariable, std::to_string(fd_).c_str(), 1);
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace dualpipe
