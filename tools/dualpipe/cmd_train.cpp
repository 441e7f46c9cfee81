// `dualpipe train`: train a small real model with a pipeline schedule on local processes (the README's first
// command). The ranks run `dualpipe-train-worker` (tools/dualpipe/train/, built next to this program when LibTorch
// is available), so `dualpipe` itself never loads LibTorch. Without --worker this process becomes
// `dualpipe-train-worker --launch LAUNCH OPTIONS`, which checks the options once, then starts this machine's ranks
// as forks of itself (LibTorch loaded once, not once per rank: include/dualpipe/train/job_launch.h) under `dualpipe launch`'s
// supervisor (free port, rank-prefixed output, every rank stopped when one fails), and whose exit status is the
// job's; with --worker it becomes one rank.
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"
#include "dualpipe/run/train_options.h"
#include "dualpipe/util/error.h"
#include "train_options.h"

namespace dualpipe::cli {
namespace {

constexpr const char* kWorkerName = "dualpipe-train-worker";

struct TrainCommand {
  run::TrainConfig options;
  TrainLaunch launch;
  bool worker = false;
};

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

void run(TrainCommand& c) {
  run::resolve_schedule_file(c.options);  // the ranks to start
  const std::string worker = worker_executable(self_executable());
  std::vector<std::string> args = {worker};
  if (!c.worker) {
    args.push_back("--launch");
    for (std::string& a : train_launch_arguments(c.launch)) args.push_back(std::move(a));
  }
  for (std::string& a : run::command_arguments(c.options, /*every_option=*/true)) args.push_back(std::move(a));
  become(worker, std::move(args));
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto [sub, command] = add_command<TrainCommand>(app, "train", run,
      "Train a transformer language model on text with a pipeline schedule on local processes: loss, "
      "validation loss, tokens/s; step 1 checked against a single-process run; a sample at the end");
  add_train_options(*sub, command->options);
  add_train_launch_options(*sub, command->launch);
  sub->add_flag("--worker", command->worker,
                "Run as one rank of a job started elsewhere, found through MASTER_ADDR, MASTER_PORT, RANK and "
                "WORLD_SIZE (to start the ranks yourself, e.g. on several machines; give every rank the same "
                "options)");
  sub->footer(
      "The model: a byte-level decoder-only transformer (--layers pre-LayerNorm blocks of causal attention and a\n"
      R"(GELU MLP) cut into the schedule's stages, trained with AdamW on --data (default: Debian's fortunes). Every
rank builds the same weights and reads the same sequences from --seed. See docs/train.md.
Examples:
  dualpipe train
  dualpipe train --schedule zbv --steps 100 --metrics run.jsonl && dualpipe plot --metrics run.jsonl
  dualpipe train --data my.txt --checkpoint-dir ckpt --save-every 20 --keep 2
  dualpipe train --checkpoint-dir ckpt --resume --steps 200
  dualpipe train --schedule 1f1b --layers 14 --layers-per-stage 3,4,4,3 --recompute)");
}

}  // namespace dualpipe::cli
