#include "rank_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <cstdlib>

#include "dualpipe/launch/signal_pipe.h"

extern char** environ;

namespace dualpipe::launch {
namespace {

// For a rank that is a fork, what exec would have done to its descriptors: closes the close-on-exec ones (the
// launcher's pipes of other ranks, its signal pipe), so that it holds what a program started by exec would.
void close_on_exec_descriptors() {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return;
  std::vector<int> marked;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const int fd = std::atoi(e->d_name);
    const int flags = fcntl(fd, F_GETFD);
    if (fd != dirfd(dir) && flags >= 0 && (flags & FD_CLOEXEC)) marked.push_back(fd);
  }
  closedir(dir);
  for (int fd : marked) close(fd);
}

}  // namespace

void exec_child(const ExecPlan& plan) {
  setpgid(0, 0);  // its own group, so the launcher can stop it and everything it starts with one kill()
  // A rank never outlives its launcher, also when the launcher is SIGKILLed (or OOM-killed) and cannot stop it.
  // The signal survives exec. A launcher that died before this line left the rank to another parent already.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != plan.launcher) _exit(127);
  dup2(plan.stdin_fd, STDIN_FILENO);
  dup2(plan.out_fd, STDOUT_FILENO);
  dup2(plan.err_fd, STDERR_FILENO);
  SignalPipe::restore_defaults_in_child();  // then unblock, as the launcher blocked them around fork()
  sigprocmask(SIG_SETMASK, &plan.mask, nullptr);
  setrlimit(RLIMIT_NOFILE, &plan.files);
  environ = const_cast<char**>(plan.envp.data());
  if (plan.entry) {
    close(plan.report_fd);  // the launcher reads EOF, as after a successful exec
    close_on_exec_descriptors();
    std::exit((*plan.entry)());
  }
  execvp(plan.argv[0], plan.argv.data());
  const int error = errno;
  if (write(plan.report_fd, &error, sizeof error) < 0) {
  }
  _exit(127);
}

}  // namespace dualpipe::launch
