// `dualpipe train`: train a small real model with a pipeline schedule on local processes (the README's first
// command). The ranks run `dualpipe-train-worker` (tools/dualpipe/train/, built next to this program when LibTorch
// is available), so `dualpipe` itself never loads LibTorch. Without --worker this process becomes
// `dualpipe launch --nproc R -- dualpipe-train-worker OPTIONS` (free port, rank-prefixed output, every rank
// stopped when one fails) and the launcher's exit status is the job's; with --worker it becomes one rank.
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"
#include "dualpipe/error.h"
#include "train_options.h"

namespace dualpipe::cli {
namespace {

constexpr const char* kWorkerName = "dualpipe-train-worker";

struct TrainCommand {
  TrainOptions options;
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

void run(const TrainCommand& c) {
  check_train_options(c.options);  // one clear error here rather than one per rank
  const std::string self = self_executable();
  const std::string worker = worker_executable(self);
  std::vector<std::string> args;
  if (!c.worker) args = {"dualpipe", "launch", "--nproc", std::to_string(c.options.ranks), "--"};
  args.push_back(worker);
  for (std::string& a : train_arguments(c.options)) args.push_back(std::move(a));
  become(c.worker ? worker : self, std::move(args));
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto command = std::make_shared<TrainCommand>();
  CLI::App* sub = app.add_subcommand(
      "train", "Train a small model with a pipeline schedule on local processes: per-step loss, step time and "
               "measured bubble; step 1 checked against a single-process run; a trace of every action");
  sub->footer(
      "The model: --layers residual MLP blocks (h -> 4h -> h, split-aware so I/W actions defer weight gradients)\n"
      "cut into the schedule's stages, regressing a fixed random teacher network on inputs generated from --seed;\n"
      "every rank builds the same weights and batches from the seed. The trace opens in https://ui.perfetto.dev;\n"
      "'dualpipe compare --trace FILE' sets it beside the simulated plan. See docs/train.md.\n"
      "Examples:\n"
      "  dualpipe train\n"
      "  dualpipe train --schedule zbv --steps 50 --hidden 64\n"
      "  dualpipe train --schedule 1f1b --optimizer sgd --trace 1f1b.json");
  add_train_options(*sub, command->options);
  sub->add_flag("--worker", command->worker,
                "Run as one rank of a job started elsewhere, found through MASTER_ADDR, MASTER_PORT, RANK and "
                "WORLD_SIZE (to start the ranks yourself, e.g. on several machines; give every rank the same "
                "options)");
  sub->callback([command] { run(*command); });
}

}  // namespace dualpipe::cli
