// dualpipe-train-worker: one rank of `dualpipe train` (see cmd_train.cpp, which starts it). Kept out of the
// `dualpipe` program so that only the ranks load LibTorch.
#include <cstdlib>
#include <iostream>
#include <string>

#include "../train_options.h"
#include "dualpipe/error.h"
#include "train_job.h"

int main(int argc, char** argv) {
  dualpipe::cli::TrainOptions options;
  CLI::App app{"One rank of `dualpipe train` (started by it; see `dualpipe train --help`)",
               "dualpipe-train-worker"};
  dualpipe::cli::add_train_options(app, options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    dualpipe::cli::run_train_rank(options);
  } catch (const std::exception& e) {
    std::string message = e.what();
    // LibTorch errors carry a C++ backtrace after their message: noise for a user.
    const std::size_t backtrace = message.find("\nException raised from");
    if (backtrace != std::string::npos) message.resize(backtrace);
    // Say which process failed (the launcher's prefix is the same, but by hand there is none), once.
    const char* rank = std::getenv("RANK");
    if (message.rfind("rank ", 0) != 0) message = std::string("rank ") + (rank ? rank : "?") + ": " + message;
    std::cerr << "dualpipe train: " << message << std::endl;
    return 1;
  }
  return 0;
}
