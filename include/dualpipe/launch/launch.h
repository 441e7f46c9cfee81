// `dualpipe launch`: start this node's ranks of a job and supervise them, like torchrun. Three parts:
//   rendezvous.h   checks of the master address and port before any rank starts (the rendezvous itself is the
//                  ranks' own: rank 0 hosts the store, comm::GlooCommunicator);
//   supervisor.h   one attempt: starting the ranks, relaying their output, stopping them all when one fails;
//   launch.h       (this file) the restart policy: up to max_restarts further attempts after a rank failure.
//
// Each rank finds its peers only through the environment, as under torchrun (node_layout.h lists the variables):
//   MASTER_ADDR/MASTER_PORT  where rank 0 hosts the rendezvous store
//   RANK/WORLD_SIZE          this process's rank and the number of ranks in the job
//   LOCAL_RANK/LOCAL_WORLD_SIZE, GROUP_RANK (the node), TORCHELASTIC_RESTART_COUNT (0, 1, ... by attempt)
// The launcher only sets them; nothing else passes between it and the ranks. So the same programs run under
// torchrun, SLURM or mpirun (comm/launch_environment.h), or started by hand; see docs/launch.md.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "dualpipe/launch/node_layout.h"

namespace dualpipe::launch {

struct LaunchOptions {
  NodeLayout layout;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: on one node a free port on master_addr, picked anew for each attempt; on several, 29500
  double grace_seconds = 5.0;  // between SIGTERM and SIGKILL when stopping ranks
  int max_restarts = 0;        // after a rank failure, stop the rest and start them all again, up to this often
  std::vector<std::string> command;  // PROGRAM ARGS...; PROGRAM without '/' is searched in PATH
  // When set, the ranks are forks of this process that return their exit status from rank_entry instead of
  // executing `command` (which then only names them), each with its environment, output pipes, process group and
  // signals set up as for `command`. For a launcher that is itself the ranks' program: what it loaded at its start
  // (LibTorch: about 0.8 s of CPU and 50,000 page faults per process) is not loaded again by every rank. The
  // launcher must not have started a thread (run() checks).
  std::function<int()> rank_entry;
};

// Runs the job's attempts on this node (supervisor.h) and returns the launcher's exit status: 0 when every rank
// exited 0, 1 when a rank failed (after the last restart), 128+N when the launcher got signal N (never
// restarted). Logs each restart with its cause on stderr. Throws InvalidArgument for an option out of range, a
// PROGRAM that cannot be executed, a taken port or an address that is not this machine's (rendezvous.h).
int run(const LaunchOptions& options);

}  // namespace dualpipe::launch
