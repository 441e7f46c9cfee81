// The restart policy of `dualpipe launch` (launch.h): attempts until one succeeds, the launcher is told to stop,
// or the restarts are used up. Like torchelastic, a failure anywhere restarts every rank of this node: the ranks'
// state lives in their checkpoints (dualpipe train resumes from the newest valid one when
// TORCHELASTIC_RESTART_COUNT > 0), not in the launcher. On several nodes each launcher restarts its own ranks;
// a failure on one node makes the ranks of every other node fail too, so all restart and meet again at the
// rendezvous, which waits for late nodes up to the ranks' timeout.
#include <dirent.h>
#include <sys/resource.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "dualpipe/launch/launch.h"
#include "dualpipe/launch/rendezvous.h"
#include "dualpipe/launch/signal_pipe.h"
#include "dualpipe/launch/supervisor.h"
#include "dualpipe/util/error.h"
#include "ranks_text.h"

namespace dualpipe::launch {
namespace {

void say(const std::string& text) { std::cerr << "dualpipe launch: " << text << std::endl; }

// "4 ranks" on one node; "node 1 of 2: ranks 2-3 of 4" on several.
std::string layout_text(const NodeLayout& l) {
  if (l.nnodes == 1) return ranks_text(l.world_size);
  const int last = l.first_rank() + l.local_ranks() - 1;
  return detail::concat("node ", l.node_rank, " of ", l.nnodes, ": ", l.local_ranks() == 1 ? "rank " : "ranks ",
                        l.first_rank(), l.local_ranks() == 1 ? "" : detail::concat("-", last), " of ", l.world_size);
}

// Two pipes per rank stay open in the launcher: raises the soft open-file limit if it is too low. Returns the
// original limit, which the ranks get back (programs using select() may depend on it).
rlimit raise_open_file_limit(int local_ranks) {
  rlimit original{};
  getrlimit(RLIMIT_NOFILE, &original);
  const rlim_t needed = static_cast<rlim_t>(2 * local_ranks + 32);
  if (original.rlim_cur != RLIM_INFINITY && original.rlim_cur < needed) {
    rlimit raised = original;
    raised.rlim_cur = original.rlim_max == RLIM_INFINITY ? needed : std::min(needed, original.rlim_max);
    setrlimit(RLIMIT_NOFILE, &raised);
    DUALPIPE_REQUIRE(raised.rlim_cur >= needed, "--nproc-per-node ", local_ranks, " needs about ", needed,
                     " open files, but the limit is ", raised.rlim_cur, " (see ulimit -n)");
  }
  return original;
}

// The threads of this process; 0 where /proc cannot tell.
int thread_count() {
  DIR* tasks = opendir("/proc/self/task");
  if (!tasks) return 0;
  int n = 0;
  while (const dirent* e = readdir(tasks)) n += e->d_name[0] != '.';
  closedir(tasks);
  return n;
}

// The options' ranges, named by their flags in `dualpipe launch` and `dualpipe train`.
void check_options(const LaunchOptions& o) {
  DUALPIPE_CHECK(o.layout.local_ranks() >= 1);
  if (o.rank_entry) {
    // A fork has only the thread that forked: one whose other threads held locks (malloc's, a pool's) or had work
    // half done would inherit them held forever.
    const int threads = thread_count();
    DUALPIPE_CHECK(threads <= 1, "the launcher forks its ranks, so it must have one thread, not ", threads);
  }
  DUALPIPE_REQUIRE(!o.command.empty() && !o.command[0].empty(),
                   "launch needs a PROGRAM to run: dualpipe launch --nproc N [options] -- PROGRAM ARGS...");
  DUALPIPE_REQUIRE(!o.master_addr.empty(), "--master-addr must not be empty");
  DUALPIPE_REQUIRE(o.master_port >= 0 && o.master_port <= 65535,
                   "--master-port must be a TCP port between 1 and 65535 (or 0 to pick a free one), got ",
                   o.master_port);
  DUALPIPE_REQUIRE(std::isfinite(o.grace_seconds) && o.grace_seconds >= 0 && o.grace_seconds <= 3600,
                   "--timeout-grace must be between 0 and 3600 seconds, got ", o.grace_seconds);
  DUALPIPE_REQUIRE(o.max_restarts >= 0 && o.max_restarts <= 1000, "--max-restarts must be between 0 and 1000, got ",
                   o.max_restarts);
}

}  // namespace

int run(const LaunchOptions& given) {
  check_options(given);
  LaunchOptions options = given;
  // Several nodes must agree on a port, so it cannot be picked here: torchrun's default.
  if (options.layout.nnodes > 1 && options.master_port == 0) options.master_port = 29500;
  const NodeLayout& layout = options.layout;
  const bool runs_rank0 = layout.node_rank == 0;
  if (options.master_port != 0) check_master_address(options.master_addr, options.master_port, runs_rank0);

  const rlimit original_files = raise_open_file_limit(layout.local_ranks());
#ifdef __linux__
  // Orphaned grandchildren of the ranks are reparented to the launcher instead of init, so it reaps them and
  // kill(-group, 0) stops seeing them once they are gone, even where init does not reap (containers).
  prctl(PR_SET_CHILD_SUBREAPER, 1);
#endif
  const SignalPipe signals;
  for (int restart = 0;; ++restart) {
    Attempt attempt;
    attempt.layout = layout;
    attempt.master_addr = options.master_addr;
    attempt.master_port = options.master_port != 0 ? options.master_port : pick_free_port(options.master_addr);
    attempt.grace_seconds = options.grace_seconds;
    attempt.restart_count = restart;
    attempt.max_restarts = options.max_restarts;
    attempt.command = options.command;
    attempt.rank_entry = options.rank_entry;
    if (restart == 0 || options.master_port == 0) {
      say(detail::concat(layout_text(layout), ", MASTER_ADDR=", attempt.master_addr,
                         ", MASTER_PORT=", attempt.master_port));
    }
    const AttemptResult result = run_attempt(attempt, signals, original_files);
    if (result.outcome != AttemptResult::Outcome::rank_failed) {
      setrlimit(RLIMIT_NOFILE, &original_files);
      return result.status;
    }
    if (restart == options.max_restarts) {
      if (options.max_restarts > 0)
        say(detail::concat("giving up: ", result.cause, ", and all ", options.max_restarts, " restarts are used"));
      setrlimit(RLIMIT_NOFILE, &original_files);
      return result.status;
    }
    say(detail::concat("restart ", restart + 1, " of ", options.max_restarts, ": ", result.cause, "; starting ",
                       layout.local_ranks() == layout.world_size ? "all " : "", ranks_text(layout.local_ranks()),
                       " again"));
  }
}

}  // namespace dualpipe::launch
