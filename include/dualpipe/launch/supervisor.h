// Process supervision for `dualpipe launch`: starting this node's ranks, relaying their output, noticing the first
// failure and stopping the rest. One attempt of a job; the restart policy (launch.h) runs attempts.
#pragma once

#include <sys/resource.h>

#include <functional>
#include <string>
#include <vector>

#include "dualpipe/launch/node_layout.h"

namespace dualpipe::launch {

class SignalPipe;

struct Attempt {
  NodeLayout layout;
  std::string master_addr;
  int master_port = 0;
  double grace_seconds = 5.0;  // between SIGTERM and SIGKILL when stopping ranks
  int restart_count = 0;       // TORCHELASTIC_RESTART_COUNT: 0 for the first attempt
  int max_restarts = 0;
  std::vector<std::string> command;  // PROGRAM ARGS...; PROGRAM without '/' is searched in PATH
  std::function<int()> rank_entry;   // set: the ranks are forks of this process (LaunchOptions::rank_entry)
};

struct AttemptResult {
  enum class Outcome { succeeded, rank_failed, launcher_signalled };
  Outcome outcome = Outcome::succeeded;
  int status = 0;     // the launcher's exit status: 0, 1 (a rank failed), 128+N (the launcher got signal N)
  std::string cause;  // rank_failed: the root cause in a few words ("rank 2 was killed by signal 9 (SIGKILL)")
};

// Starts the ranks of `attempt.layout` on this node, each in its own process group, relays their output line by
// line with a "[rank R] " prefix (stdout to stdout, stderr to stderr), and waits for them. When one rank fails
// (non-zero status or a signal), or the launcher gets SIGINT/SIGTERM/SIGHUP, it stops every rank's process group
// (SIGTERM, then SIGKILL after the grace period) and says why on stderr. Throws InvalidArgument when PROGRAM
// cannot be executed ("cannot run 'x': No such file or directory"), after stopping any rank already started.
// `original_files`: the open-file limit the ranks get (the launcher's own may be raised).
AttemptResult run_attempt(const Attempt& attempt, const SignalPipe& signals, const rlimit& original_files);

}  // namespace dualpipe::launch
