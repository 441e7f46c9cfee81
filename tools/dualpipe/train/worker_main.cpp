// dualpipe-train-worker: the ranks of `dualpipe train` (see cmd_train.cpp, which becomes it), a thin shell over
// train::run_training_rank. Three ways to run:
//   --launch LAUNCH OPTIONS   what `dualpipe train` becomes: checks the options, then starts this machine's ranks
//                             as forks of itself (train/job_launch.h)
//   OPTIONS                   one rank, its place in the job from the environment (torchrun, dualpipe train --worker)
//   --check OPTIONS           only the check of the options and the files
// Kept out of the `dualpipe` program so that only the ranks load LibTorch.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "../train_options.h"
#include "dualpipe/comm/communicator.h"
#include "dualpipe/launch/exit_record.h"
#include "dualpipe/launch/signal_pipe.h"
#include "dualpipe/train/job_launch.h"
#include "dualpipe/train/run_plan.h"
#include "dualpipe/train/trainer.h"
#include "dualpipe/util/error.h"
#include "kill_at_step.h"

namespace {

// `message` for a user: LibTorch errors carry a C++ backtrace after theirs, which is noise here.
std::string without_backtrace(std::string message) {
  const std::size_t backtrace = message.find("\nException raised from");
  if (backtrace != std::string::npos) message.resize(backtrace);
  return message;
}

// Bad input (options, a schedule file that breaks a rule) is 2; a fault (a peer, the network, a bug) is 1.
int status_of(const std::exception& e) {
  return dynamic_cast<const dualpipe::InvalidArgument*>(&e) || dynamic_cast<const dualpipe::InvalidSchedule*>(&e) ? 2
                                                                                                                  : 1;
}

// Ends this process once its output is out, without running the static destructors: LibTorch's deregister every
// operator it registered at load, 0.3 s of CPU at every exit of a rank, the check or the launcher (perf), with
// nothing to gain. Whatever a run writes is closed at the end of its scope, before this.
[[noreturn]] void exit_now(int status) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(status);
}

// One rank, or with `check_only` the check (WorkerRun).
int run_worker(dualpipe::train::TrainConfig config, bool check_only) {
  // Started again by a restarting launcher (`dualpipe launch --max-restarts`, torchrun): continue from the newest
  // complete checkpoint, if any.
  const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  if (restart && std::atoi(restart) > 0 && !config.checkpoint.dir.empty()) config.checkpoint.resume = true;
  try {
    if (check_only) {
      dualpipe::train::check_config(config);
    } else {
      dualpipe::train::run_training_rank(config, dualpipe::cli::kill_hooks_from_environment());
    }
  } catch (const std::exception& e) {
    std::string message = without_backtrace(e.what());
    if (!check_only) {
      // Say which process failed (the launcher's prefix is the same, but by hand there is none), once.
      const char* rank = std::getenv("RANK");
      if (message.rfind("rank ", 0) != 0) message = std::string("rank ") + (rank ? rank : "?") + ": " + message;
    }
    std::cerr << "dualpipe train: " << message << std::endl;
    // For the launcher: the peer this rank failed because of, whatever the message's wording.
    if (const auto* lost = dynamic_cast<const dualpipe::comm::CommError*>(&e); lost && lost->rank() >= 0)
      std::cerr << dualpipe::exit_record(lost->rank()) << std::endl;
    return status_of(e);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  dualpipe::train::TrainConfig config;
  dualpipe::cli::TrainLaunch launch;
  bool check_only = false, launching = false;
  CLI::App app{"The ranks of `dualpipe train` (started by it; see `dualpipe train --help`)", "dualpipe-train-worker"};
  dualpipe::cli::add_train_options(app, config);
  dualpipe::cli::add_train_launch_options(app, launch);
  app.add_flag("--check", check_only, "Only check the options and the files, then exit (0: fine, 2: not)");
  app.add_flag("--launch", launching,
               "Check the options, then start this machine's ranks of the job as forks of this process and supervise "
               "them (what `dualpipe train` runs)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (!launching) exit_now(run_worker(config, check_only));
  dualpipe::launch::say_when_stopped_while_no_rank_runs("dualpipe train");
  try {
    exit_now(dualpipe::train::launch_training(config, launch,
                                            [&config](bool check) -> int { exit_now(run_worker(config, check)); }));
  } catch (const std::exception& e) {
    std::cerr << "dualpipe train: " << without_backtrace(e.what()) << std::endl;
    exit_now(status_of(e));
  }
}
