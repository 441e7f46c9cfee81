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
  config.pipeline.schedule = "dualpipev";
  config.parallel.pp = 2;
  config.pipeline.microbatches = 4;
  config.model.layers = 4;
  config.model.hidden = 64;
  config.model.heads = 2;
  config.model.seq_len = 32;
  config.optimizer.steps = 10;
  config.optimizer.warmup = 2;
  config.outputs.eval_every = 5;
  config.outputs.sample_tokens = 40;
  config.outputs.trace = "";
  if (argc > 1) config.data.files = {argv[1]};
  try {
    dualpipe::train::check_config(config);  // one clear error before any rank starts
  } catch (const dualpipe::Error& e) {
    std::cerr << "train_transformer: " << e.what() << "\n";
    return 2;
  }
  auto hub = std::make_shared<dualpipe::comm::InProcessHub>(config.parallel.pp);
  std::vector<std::thread> ranks;
  std::atomic<bool> failed{false};
  for (int r = 0; r < config.parallel.pp; ++r)
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
