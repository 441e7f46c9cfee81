// One job per directory: an advisory lock (flock) on DIR/.lock, held for as long as the holder lives. The file
// names the holder (pid, host, start time) so that a refused job can say who holds it. The kernel releases the
// lock when the holder exits, however it exits, so a killed job never leaves a stale lock behind.
#pragma once

#include <string>

namespace dualpipe {

class DirectoryLock {
 public:
  // Takes the lock of `dir` (which must exist) for `what` ("dualpipe train, world rank 0"). Throws
  // InvalidArgument naming `option`, the directory and the holder when another process holds it.
  DirectoryLock(const std::string& dir, const std::string& option, const std::string& what);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace dualpipe
