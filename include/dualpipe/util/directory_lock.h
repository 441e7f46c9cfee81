// One job per directory: an advisory lock (flock) on DIR/.lock, held for as long as the holder lives. The file
// names the holder (pid, host, start time) so that a refused job can say who holds it. The kernel releases the
// lock when the holder exits, however it exits, so a killed job never leaves a stale lock behind.
#pragma once

#include <string>

namespace dualpipe {

class DirectoryLock {
 public:
  // Takes the lock of `dir` (which must exist) for `what` ("dualpipe train, world rank 0"). Throws
  // InvalidArgument naming `option`, the directory and the holder when another process holds it. A process forked
  // by a holder that called share_with_forks() takes the same lock over, as its holder.
  DirectoryLock(const std::string& dir, const std::string& option, const std::string& what);

  // Lets processes this one forks from now on take this lock over (the launcher of a job holds it from before its
  // ranks start; its rank 0 then holds it as its own), where they would otherwise find it held. The descriptor is
  // then inherited by programs this one starts too (they die with the launcher).
  void share_with_forks() const;
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  void write_holder(const std::string& what);

  int fd_ = -1;
};

}  // namespace dualpipe
