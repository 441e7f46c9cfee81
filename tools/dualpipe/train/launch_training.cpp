#include "launch_training.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "dualpipe/launch/launch.h"
#include "dualpipe/launch/node_layout.h"
#include "dualpipe/util/directory_lock.h"
#include "dualpipe/util/error.h"

namespace dualpipe::cli {
namespace {

// The ranks this machine will run, as the launcher splits the world; 1 where the options cannot make a world (the
// check then names the option, before the launcher's own error about the world).
int local_ranks(const TrainLaunch& l, int world_size) {
  try {
    return launch::layout_for_world(world_size, l.nnodes, l.node_rank, l.nproc_per_node).local_ranks();
  } catch (const InvalidArgument&) {
    return 1;
  }
}

// The options and the files checked once, with one clear error, before any rank starts, with this machine's
// count of ranks in LOCAL_WORLD_SIZE as the ranks will have it (NCCL needs a GPU for each). Its exit status 2 (bad
// input) becomes ours.
void check_in_child(const WorkerRun& worker, int local_ranks) {
  std::cout.flush();
  const pid_t parent = getpid();
  const pid_t pid = fork();
  DUALPIPE_REQUIRE(pid >= 0, "cannot start the check of the options: ", std::strerror(errno));
  if (pid == 0) {
    // The check dies with us: a `kill` of dualpipe train during the check leaves no checker behind.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);  // we died before prctl took effect
    prctl(PR_SET_NAME, "dualpipe-check");  // its name in ps and top: it runs this program's command line
    setenv("LOCAL_WORLD_SIZE", std::to_string(local_ranks).c_str(), 1);
    std::exit(worker(true));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  // The check printed the reason.
  std::exit(WIFEXITED(status) && WEXITSTATUS(status) == 2 ? 2 : 1);
}

}  // namespace

int launch_training(const train::TrainConfig& config, const TrainLaunch& l, const WorkerRun& worker) {
  const int world_size = config.world_size();
  check_in_child(worker, local_ranks(l, world_size));
  // Refused here, with exit 2, when another job holds the directory; world rank 0 (on node 0) takes the lock for
  // the job's life. Other nodes would only find their own job's lock.
  if (l.node_rank == 0 && !config.checkpoint_dir.empty()) {
    const DirectoryLock probe(config.checkpoint_dir, "--checkpoint-dir", "dualpipe train (checking the options)");
  }
  launch::LaunchOptions options;
  options.layout = launch::layout_for_world(world_size, l.nnodes, l.node_rank, l.nproc_per_node);
  options.master_addr = l.master_addr;
  options.master_port = l.master_port;
  options.max_restarts = l.max_restarts;
  options.command = {"dualpipe-train-worker"};  // names the ranks in messages; they are forks of this process
  options.rank_entry = [&worker] { return worker(false); };
  if (l.max_restarts > 0 && config.checkpoint_dir.empty())
    std::cerr << "dualpipe train: note: --max-restarts without --checkpoint-dir: a restarted job begins again at "
                 "step 1\n";
  return launch::run(options);
}

}  // namespace dualpipe::cli
