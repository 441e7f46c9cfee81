// Starting one rank's process (internal to src/launch/): in the forked child, exec the rank's program, or for a
// rank that is a fork of the launcher call its entry, each in a process group of its own that dies with the launcher.
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace dualpipe::launch {

// Everything exec needs, prepared before fork, so that the child does little more than dup2() and exec.
struct ExecPlan {
  std::vector<std::string> env;
  std::vector<char*> argv, envp;
  int stdin_fd = -1, out_fd = -1, err_fd = -1, report_fd = -1;
  sigset_t mask;
  rlimit files;
  pid_t launcher = -1;
  const std::function<int()>* entry = nullptr;  // a rank that is a fork: called instead of exec
};

// In the forked child. Never returns: execs the program, or reports errno through the CLOEXEC pipe (which a
// successful exec closes, so the parent reads EOF) and exits; or, for a rank that is a fork, exits with what its
// entry returns.
[[noreturn]] void exec_child(const ExecPlan& plan);

}  // namespace dualpipe::launch
