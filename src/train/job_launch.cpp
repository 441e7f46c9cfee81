#include "dualpipe/train/job_launch.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>

#include "dualpipe/launch/launch.h"
#include "dualpipe/launch/node_layout.h"
#include "dualpipe/run/replan.h"
#include "dualpipe/run/train_values.h"
#include "dualpipe/train/run_plan.h"
#include "dualpipe/util/byte_size.h"
#include "dualpipe/util/directory_lock.h"
#include "dualpipe/util/error.h"

namespace dualpipe::train {
namespace {

// The ranks this machine will run, as the launcher splits the world; 1 where the options cannot make a world (the
// check then names the option, before the launcher's own error about the world).
int local_ranks(const run::TrainLaunch& l, int world_size) {
  try {
    return launch::layout_for_world(world_size, l.nnodes, l.node_rank, l.nproc_per_node).local_ranks();
  } catch (const InvalidArgument&) {
    return 1;
  }
}

// The ranks one machine may run, each a process of LibTorch: about 280 MB resident, about 60 MB of it its own
// (measured with the default model; the rest is shared with the launcher it is forked from: docs/train.md),
// counted as 100 MB. More than 64 is a typo for a machine's GPUs. (The model's own size is checked by the ranks'
// option check, check_config.)
constexpr int kMaxLocalTrainRanks = 64;
constexpr double kRankOwnBytes = 100e6;

// MemAvailable of /proc/meminfo in bytes, or -1 where it cannot be read.
double available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string name;
  double kib = 0;
  while (meminfo >> name >> kib) {
    if (name == "MemAvailable:") return kib * 1024;
    meminfo.ignore(256, '\n');
  }
  return -1;
}

// Refuses, before anything starts, a world whose ranks on this machine are more than the bound or than its
// memory holds.
void check_local_world(int local_ranks, int world_size) {
  DUALPIPE_REQUIRE(local_ranks <= kMaxLocalTrainRanks, "this machine would run ", local_ranks, " of the ", world_size,
                   " ranks (pipeline x data x tensor x context parallel), above the limit of ", kMaxLocalTrainRanks,
                   " ranks per machine: spread them over machines with --nnodes, or use fewer");
  const double available = available_memory_bytes();
  DUALPIPE_REQUIRE(available < 0 || local_ranks * kRankOwnBytes <= available, "this machine would run ",
                   local_ranks, " ranks of about ", describe_bytes(kRankOwnBytes), " each beyond what they share (",
                   describe_bytes(local_ranks * kRankOwnBytes), "), above the ", describe_bytes(available),
                   " of memory it has available: spread them over machines with --nnodes, or use fewer");
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
    for (int signo : {SIGINT, SIGTERM})  // the launcher says it was stopped (once); the check just ends
      if (signal(signo, SIG_DFL) == SIG_IGN) signal(signo, SIG_IGN);
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

int launch_training(TrainConfig& config, const run::TrainLaunch& l, const WorkerRun& worker) {
  // SIGUSR1 asks the running ranks for a stall report (launch::run forwards it); before they run it is ignored
  // rather than ending the launcher. The ranks start with its default action (SignalPipe) and catch it.
  signal(SIGUSR1, SIG_IGN);
  const int world_size = config.world_size();
  DUALPIPE_REQUIRE(config.stragglers.action != run::StragglerAction::Replan || l.nnodes == 1, "--on-straggler replan restarts the ranks of "
                   "one machine; with --nnodes ", l.nnodes, " use --on-straggler report and restart every node with "
                   "the command it prints");
  check_local_world(local_ranks(l, world_size), world_size);
  check_in_child(worker, local_ranks(l, world_size));
  // Refused here, with exit 2, when another job holds the directory: the lock is taken before any rank starts, so
  // of two jobs started together into one directory one launches and the other is refused. Held for the job's
  // life, restarts included; world rank 0 (a fork of this process, on node 0) takes it over. Other nodes would only
  // find their own job's lock.
  std::optional<DirectoryLock> lock;
  if (l.node_rank == 0 && !config.checkpoint.dir.empty()) {
    lock.emplace(config.checkpoint.dir, "--checkpoint-dir", "dualpipe train (starting the ranks)");
    lock->share_with_forks();
    train::check_fresh_start(config);  // a job that ended between the check and the lock saved here meanwhile
  }
  launch::LaunchOptions options;
  options.layout = launch::layout_for_world(world_size, l.nnodes, l.node_rank, l.nproc_per_node);
  options.master_addr = l.master_addr;
  options.master_port = l.master_port;
  options.max_restarts = l.max_restarts;
  options.command = {"dualpipe-train-worker"};  // names the ranks in messages; they are forks of this process
  options.rank_entry = [&worker] { return worker(false); };
  if (l.max_restarts > 0 && config.checkpoint.dir.empty())
    std::cerr << "dualpipe train: note: --max-restarts without --checkpoint-dir: a restarted job begins again at "
                 "step 1\n";
  const bool may_replan = config.stragglers.action == run::StragglerAction::Replan;  // with a checkpoint directory, on one machine
  if (may_replan) std::remove(run::replan_request_path(config.checkpoint.dir).c_str());  // an earlier job's, unread
  for (;;) {
    const std::string job = run::start_replan_job();
    const int status = launch::run(options);
    // The ranks stopped at a checkpoint and left the re-plan beside it: start them again with it.
    const std::optional<std::string> from = may_replan && status == 0 ? run::replan_request_job(config.checkpoint.dir)
                                                                      : std::nullopt;
    if (!from) return status;
    if (*from != job) {  // the ranks ran to their last step; something else put the file there
      std::cout << "dualpipe train: ignored " << run::replan_request_path(config.checkpoint.dir)
                << ": not written by this job's ranks (they write it only when they stop to re-plan)" << std::endl;
      return status;
    }
    const std::optional<run::ReplanRequest> request = run::read_replan_request(config.checkpoint.dir);
    if (!request) return status;
    const std::string before =
        config.pipeline.schedule + " with layers per stage " + train::make_run_plan(config).cut.to_string();
    config = run::replanned_config(*request, config);
    std::remove(run::replan_request_path(config.checkpoint.dir).c_str());
    std::cout << "dualpipe train: re-planned after step " << request->step << " for rank speeds "
              << run::format_speeds(config.stragglers.rank_speed) << ": " << before << " -> " << config.pipeline.schedule
              << " with layers per stage " << run::format_layer_counts(config.model.layers_per_stage)
              << " (step predicted " << request->replan.current_ms << " -> " << request->replan.predicted_ms
              << " ms); starting the ranks again from the checkpoint" << std::endl;
  }
}

}  // namespace dualpipe::train
