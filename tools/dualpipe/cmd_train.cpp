// `dualpipe train`: train a small real model with a pipeline schedule on local processes (the README's first
// command). The ranks run `dualpipe-train-worker` (tools/dualpipe/train/, built next to this program when LibTorch
// is available), so `dualpipe` itself never loads LibTorch. Without --worker this process becomes
// `dualpipe launch --nproc R -- dualpipe-train-worker OPTIONS` (free port, rank-prefixed output, every rank
// stopped when one fails) and the launcher's exit status is the job's; with --worker it becomes one rank.
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <climits>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"
#include "dualpipe/launch/node_layout.h"
#include "dualpipe/train/train_options.h"
#include "dualpipe/util/directory_lock.h"
#include "dualpipe/util/error.h"
#include "train_options.h"

namespace dualpipe::cli {
namespace {

constexpr const char* kWorkerName = "dualpipe-train-worker";

struct TrainCommand {
  train::TrainConfig options;
  bool worker = false;
  // Where this machine's ranks stand in the job (launch/launch.h): torchrun's multi-node flags.
  int nnodes = 1, node_rank = 0, nproc_per_node = 0;  // 0: the world split evenly over the nodes
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port (one node), 29500 (several)
  int max_restarts = 0;
};

// `dualpipe launch` arguments for this machine's share of the world.
std::vector<std::string> launch_arguments(const TrainCommand& c, int world_size) {
  const launch::NodeLayout layout = launch::layout_for_world(world_size, c.nnodes, c.node_rank, c.nproc_per_node);
  std::vector<std::string> args = {"dualpipe", "launch", "--nnodes", std::to_string(c.nnodes), "--node-rank",
                                   std::to_string(c.node_rank), "--nproc-per-node",
                                   std::to_string(layout.nproc_per_node), "--world-size", std::to_string(world_size),
                                   "--master-addr", c.master_addr, "--max-restarts", std::to_string(c.max_restarts)};
  if (c.master_port != 0) {
    args.push_back("--master-port");
    args.push_back(std::to_string(c.master_port));
  }
  args.push_back("--");
  return args;
}

std::string self_executable() {
  char buffer[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  DUALPIPE_REQUIRE(n > 0, "cannot find this program's own path (/proc/self/exe) to start the ranks");
  return std::string(buffer, static_cast<size_t>(n));
}

std::string worker_executable(const std::string& self) {
  const std::string path = self.substr(0, self.rfind('/') + 1) + kWorkerName;
  DUALPIPE_REQUIRE(access(path.c_str(), X_OK) == 0, "dualpipe train runs its ranks with '", path,
                   "', which is missing: this build has no LibTorch runtime (configure with LibTorch installed and "
                   "-DDUALPIPE_WITH_TORCH=ON, the default, then build the '", kWorkerName, "' target)");
  return path;
}

[[noreturn]] void become(const std::string& program, std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::cout.flush();
  execv(program.c_str(), argv.data());
  throw Error(detail::concat("cannot run '", program, "': ", std::strerror(errno)));
}

// The ranks this machine will run, as the launcher splits the world; 1 where the options cannot make a world (the
// check then names the option, before the launcher's own error about the world).
int local_ranks(const TrainCommand& c, int world_size) {
  try {
    return launch::layout_for_world(world_size, c.nnodes, c.node_rank, c.nproc_per_node).local_ranks();
  } catch (const InvalidArgument&) {
    return 1;
  }
}

// `worker --check OPTIONS`: the options and the files checked once, with one clear error, before any rank
// starts, with this machine's count of ranks in LOCAL_WORLD_SIZE as the ranks will have it (NCCL needs a GPU for
// each). Its exit status 2 (bad input) becomes ours.
void check_options(const std::string& worker, const train::TrainConfig& options, int local_ranks) {
  std::vector<std::string> args = {worker, "--check"};
  for (std::string& a : train_arguments(options)) args.push_back(std::move(a));
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::cout.flush();
  const pid_t parent = getpid();
  const pid_t pid = fork();
  DUALPIPE_REQUIRE(pid >= 0, "cannot start '", worker, "' to check the options: ", std::strerror(errno));
  if (pid == 0) {
    // The check dies with us: a `kill` of dualpipe train during the check leaves no worker behind.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);  // we died before prctl took effect
    setenv("LOCAL_WORLD_SIZE", std::to_string(local_ranks).c_str(), 1);
    execv(worker.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  // The worker printed the reason.
  std::exit(WIFEXITED(status) && WEXITSTATUS(status) == 2 ? 2 : 1);
}

void run(TrainCommand c) {
  train::resolve_schedule_file(c.options);  // the ranks to start
  const std::string self = self_executable();
  const std::string worker = worker_executable(self);
  std::vector<std::string> args;
  if (!c.worker) {
    const int world_size = c.options.world_size();
    check_options(worker, c.options, local_ranks(c, world_size));
    // Refused here, with exit 2, when another job holds the directory; world rank 0 (on node 0) takes the lock
    // for the job's life. Other nodes would only find their own job's lock.
    if (c.node_rank == 0 && !c.options.checkpoint_dir.empty()) {
      const DirectoryLock probe(c.options.checkpoint_dir, "--checkpoint-dir", "dualpipe train (checking the options)");
    }
    args = launch_arguments(c, world_size);
    if (c.max_restarts > 0 && c.options.checkpoint_dir.empty())
      std::cerr << "dualpipe train: note: --max-restarts without --checkpoint-dir: a restarted job begins again at "
                   "step 1\n";
  }
  args.push_back(worker);
  for (std::string& a : train_arguments(c.options)) args.push_back(std::move(a));
  become(c.worker ? worker : self, std::move(args));
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto command = std::make_shared<TrainCommand>();
  CLI::App* sub = app.add_subcommand(
      "train", "Train a transformer language model on text with a pipeline schedule on local processes: loss, "
               "validation loss, tokens/s; step 1 checked against a single-process run; a sample at the end");
  sub->footer(
      "The model: a byte-level decoder-only transformer (--layers pre-LayerNorm blocks of causal attention and a\n"
      "GELU MLP) cut into the schedule's stages, trained with AdamW on --data (default: Debian's fortunes). Every\n"
      "rank builds the same weights and reads the same sequences from --seed. See docs/train.md.\n"
      "Examples:\n"
      "  dualpipe train\n"
      "  dualpipe train --schedule zbv --steps 100 --metrics run.jsonl && dualpipe plot --metrics run.jsonl\n"
      "  dualpipe train --data my.txt --checkpoint-dir ckpt --save-every 20 --keep 2\n"
      "  dualpipe train --checkpoint-dir ckpt --resume --steps 200\n"
      "  dualpipe train --schedule 1f1b --layers 14 --layers-per-stage 3,4,4,3 --recompute");
  add_train_options(*sub, command->options);
  const char* launch_group = "Launch (several machines: run it on each; docs/launch.md)";
  sub->add_option("--nnodes", command->nnodes, "Machines in the job")->capture_default_str()->group(launch_group);
  sub->add_option("--node-rank", command->node_rank, "This machine's index, 0 to --nnodes minus 1")
      ->capture_default_str()
      ->group(launch_group);
  sub->add_option("--nproc-per-node", command->nproc_per_node,
                  "Ranks on each machine (default: --ranks split evenly; node K runs ranks K*N to K*N+N-1)")
      ->group(launch_group);
  sub->add_option("--master-addr", command->master_addr, "Address of node 0, where rank 0 hosts the rendezvous")
      ->capture_default_str()
      ->group(launch_group);
  sub->add_option("--master-port", command->master_port,
                  "Port of the rendezvous (default: a free one on one machine, 29500 on several)")
      ->group(launch_group);
  sub->add_option("--max-restarts", command->max_restarts,
                  "When a rank fails, restart every rank from the newest complete checkpoint in --checkpoint-dir, "
                  "up to this many times")
      ->capture_default_str()
      ->group(launch_group);
  sub->add_flag("--worker", command->worker,
                "Run as one rank of a job started elsewhere, found through MASTER_ADDR, MASTER_PORT, RANK and "
                "WORLD_SIZE (to start the ranks yourself, e.g. on several machines; give every rank the same "
                "options)");
  sub->callback([command] { run(*command); });
}

}  // namespace dualpipe::cli
