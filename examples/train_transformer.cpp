// Training the transformer language model from C++ with the training library, without the `dualpipe` command:
// two pipeline ranks as threads of this process (an in-process communicator), DualPipeV, a small model, a few
// steps on a text file. With a Gloo or NCCL group, each process would call run_training_rank the same way.
//
//   train_transformer [TEXT_FILE]      (default: Debian's fortunes, /usr/share/games/fortunes)
#include <atomic>
#include <iostream>
#include <thread>
#include <vector>

#include "dualpipe/comm/in_process_communicator.h"
#include "dualpipe/train/run_plan.h"
#include "dualpipe/train/trainer.h"

int main(int argc, char** argv) {
  dualpipe::train::TrainConfig config;
  config.schedule = "dualpipev";
  config.ranks = 2;
  config.microbatches = 4;
  config.layers = 4;
  config.hidden = 64;
  config.heads = 2;
  config.seq_len = 32;
  config.steps = 10;
  config.warmup = 2;
  config.eval_every = 5;
  config.sample_tokens = 40;
  config.trace = "";
  if (argc > 1) config.data = {argv[1]};
  try {
    dualpipe::train::check_config(config);  // one clear error before any rank starts
  } catch (const dualpipe::Error& e) {
    std::cerr << "train_transformer: " << e.what() << "\n";
    return 2;
  }
  auto hub = std::make_shared<dualpipe::comm::InProcessHub>(config.ranks);
  std::vector<std::thread> ranks;
  std::atomic<bool> failed{false};
  for (int r = 0; r < config.ranks; ++r)
    ranks.emplace_back([&, r] {
      try {
        dualpipe::train::run_training_rank(config, std::make_shared<dualpipe::comm::InProcessCommunicator>(hub, r));
      } catch (const std::exception& e) {
        std::cerr << "rank " << r << ": " << e.what() << "\n";
        hub->abort("rank " + std::to_string(r) + " failed");  // the other rank stops waiting at once
        failed = true;
      }
    });
  for (auto& t : ranks) t.join();
  return failed ? 1 : 0;
}
