// dualpipe-train-worker: one rank of `dualpipe train` (see cmd_train.cpp, which starts it), a thin shell over
// train::run_training_rank. With --check it only checks the options and the files (what `dualpipe train` runs
// once before starting the ranks). Kept out of the `dualpipe` program so that only the ranks load LibTorch.
#include <cstdlib>
#include <iostream>
#include <string>

#include "../train_options.h"
#include "dualpipe/comm/communicator.h"
#include "dualpipe/launch/exit_record.h"
#include "dualpipe/train/run_plan.h"
#include "dualpipe/train/trainer.h"
#include "dualpipe/util/error.h"
#include "kill_at_step.h"

int main(int argc, char** argv) {
  dualpipe::train::TrainConfig config;
  bool check_only = false;
  CLI::App app{"One rank of `dualpipe train` (started by it; see `dualpipe train --help`)", "dualpipe-train-worker"};
  dualpipe::cli::add_train_options(app, config);
  app.add_flag("--check", check_only, "Only check the options and the files, then exit (0: fine, 2: not)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // Started again by a restarting launcher (`dualpipe launch --max-restarts`, torchrun): continue from the newest
  // complete checkpoint, if any.
  const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  if (restart && std::atoi(restart) > 0 && !config.checkpoint_dir.empty()) config.resume = true;
  try {
    if (check_only) {
      dualpipe::train::check_config(config);
    } else {
      dualpipe::train::run_training_rank(config, dualpipe::cli::kill_hooks_from_environment());
    }
  } catch (const std::exception& e) {
    std::string message = e.what();
    // LibTorch errors carry a C++ backtrace after their message: noise for a user.
    const std::size_t backtrace = message.find("\nException raised from");
    if (backtrace != std::string::npos) message.resize(backtrace);
    if (!check_only) {
      // Say which process failed (the launcher's prefix is the same, but by hand there is none), once.
      const char* rank = std::getenv("RANK");
      if (message.rfind("rank ", 0) != 0) message = std::string("rank ") + (rank ? rank : "?") + ": " + message;
    }
    std::cerr << "dualpipe train: " << message << std::endl;
    // For the launcher: the peer this rank failed because of, whatever the message's wording.
    if (const auto* lost = dynamic_cast<const dualpipe::comm::CommError*>(&e); lost && lost->rank() >= 0)
      std::cerr << dualpipe::exit_record(lost->rank()) << std::endl;
    return dynamic_cast<const dualpipe::InvalidArgument*>(&e) ? 2 : 1;
  }
  return 0;
}
