// Minimal dualpipe runtime program: two stages, DualPipe on 2 ranks, one training step.
//
// Run it as two processes over Gloo/TCP, torchrun style:
//   MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 WORLD_SIZE=2 RANK=0 ./minimal_dualpipe &
//   MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 WORLD_SIZE=2 RANK=1 ./minimal_dualpipe
// or with no RANK set, as two threads of one process.
#include <torch/torch.h>

#include <cstdlib>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "dualpipe/comm/gloo_communicator.h"
#include "dualpipe/comm/in_process_communicator.h"
#include "dualpipe/runtime/executor.h"
#include "dualpipe/runtime/mlp_stage.h"
#include "dualpipe/schedule/generators.h"

using namespace dualpipe;

void train_one_step(std::shared_ptr<comm::Communicator> communicator) {
  at::set_num_threads(1);
  const int64_t hidden = 16, rows = 4;  // rows per micro-batch
  const int num_ranks = 2, num_microbatches = 4;
  Schedule schedule = make_schedule("dualpipe", {num_ranks, num_microbatches});

  // Every rank builds the same two stages from the same seed; under DualPipe rank r holds stage r (direction 0)
  // and stage 1-r (direction 1), i.e. both stages, as two replicas of the model. (The lock only matters when
  // ranks are threads: the seed is process-wide.)
  static std::mutex seed_lock;
  std::unique_lock<std::mutex> lock(seed_lock);
  torch::manual_seed(0);
  std::vector<runtime::MlpStage> model{runtime::MlpStage(hidden), runtime::MlpStage(hidden)};
  std::map<int, std::shared_ptr<runtime::Stage>> stages{{0, runtime::make_stage(model[0])},
                                                        {1, runtime::make_stage(model[1])}};
  runtime::ExecutorOptions options;
  options.boundaries = runtime::ExecutorOptions::uniform({{{rows, hidden}, torch::kFloat}}, schedule.num_stages);
  runtime::Executor executor(schedule, stages, communicator, options);

  // Rank 0 feeds direction 0 (micro-batches 0, 1) and computes direction 1's losses; rank 1 the reverse. Each
  // stage takes and returns a list of tensors (here one); whole batches are cut into micro-batches by the runtime.
  torch::manual_seed(100 + communicator->rank());
  runtime::StepArgs args;
  args.inputs = {torch::randn({2 * rows, hidden})};
  args.labels = {torch::randn({2 * rows, hidden})};
  lock.unlock();
  args.criterion = runtime::single_tensor_criterion(
      [](const torch::Tensor& out, const torch::Tensor& label) { return torch::mse_loss(out, label); });
  args.num_microbatches = num_microbatches;
  runtime::StepResult result = executor.step(args);

  executor.reduce_replica_gradients();  // both replicas now hold the full gradient
  torch::optim::SGD optimizer(model[0]->parameters(), 0.1);
  optimizer.add_param_group({model[1]->parameters()});
  optimizer.step();

  // One write per line: the ranks may be threads of one process sharing std::cout.
  for (int m : executor.loss_microbatches()) {
    std::ostringstream line;
    line << "rank " << communicator->rank() << " micro-batch " << m << " loss " << result.losses[m].item<float>()
         << "\n";
    std::cout << line.str() << std::flush;
  }
}

int main() {
  try {
    if (std::getenv("RANK")) {
      train_one_step(comm::GlooCommunicator::from_environment());
    } else {
      auto hub = std::make_shared<comm::InProcessHub>(2);
      std::thread other([&] { train_one_step(std::make_shared<comm::InProcessCommunicator>(hub, 1)); });
      train_one_step(std::make_shared<comm::InProcessCommunicator>(hub, 0));
      other.join();
    }
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
