// Memory (issue 4, item 5): the peak number of stage activations each rank really holds during a step, counted
// by the executor from its own state (Executor::last_step_stats()), against the simulator's figure
// (peak_activations() in simulate.h), for every schedule kind at R = 4.
//
//   build/bench_runtime_memory                   R=4, M=8
//   build/bench_runtime_memory --ranks 8 --microbatches 16
//
// Ranks are threads over the in-process communicator: the count depends on the order of actions, not on timing
// or transport. Stages are the example MLP (split-aware), so an I action hands its activations to W.
#include <torch/torch.h>

#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dualpipe/comm/in_process_communicator.h"
#include "dualpipe/runtime/executor.h"
#include "dualpipe/runtime/mlp_stage.h"
#include "dualpipe/schedule/generators.h"
#include "options.h"
#include "dualpipe/sim/simulate.h"

namespace {

using namespace dualpipe;

// Peak live activations per rank measured in one training step.
std::vector<int> measure(const Schedule& schedule) {
  const int R = schedule.num_ranks, M = schedule.num_microbatches;
  const int64_t hidden = 8, rows = 2;
  auto hub = std::make_shared<comm::InProcessHub>(R, std::chrono::seconds(60));
  std::vector<int> peaks(R, -1);
  std::vector<std::string> errors(R);
  std::mutex seed_lock;
  auto rank_main = [&](int rank) {
    try {
      at::set_num_threads(1);
      std::map<int, std::shared_ptr<runtime::Stage>> stages;
      std::vector<runtime::MlpStage> modules;
      {
        std::lock_guard<std::mutex> lock(seed_lock);
        for (int s = 0; s < schedule.num_stages; ++s)
          for (int m = 0; m < M; ++m)
            if (schedule.placement.rank(s, m) == rank && !stages.count(s)) {
              torch::manual_seed(s);
              modules.emplace_back(hidden);
              stages[s] = runtime::make_stage(modules.back());
            }
      }
      runtime::ExecutorOptions options;
      options.boundaries = runtime::ExecutorOptions::uniform({{{rows, hidden}, torch::kFloat}}, schedule.num_stages);
      runtime::Executor executor(schedule, stages, std::make_shared<comm::InProcessCommunicator>(hub, rank),
                                 options);
      runtime::StepArgs args;
      args.num_microbatches = M;
      const auto entering = static_cast<int64_t>(executor.entering_microbatches().size());
      const auto losses = static_cast<int64_t>(executor.loss_microbatches().size());
      if (entering > 0) args.inputs = {torch::randn({entering * rows, hidden})};
      if (losses > 0) args.labels = {torch::randn({losses * rows, hidden})};
      args.criterion = runtime::single_tensor_criterion(
          [](const torch::Tensor& o, const torch::Tensor& l) { return torch::mse_loss(o, l); });
      executor.step(args);
      peaks[rank] = executor.last_step_stats().peak_live_activations;
    } catch (const std::exception& e) {
      errors[rank] = e.what();
      hub->abort(std::string("rank ") + std::to_string(rank) + " failed");
    }
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < R; ++r) threads.emplace_back(rank_main, r);
  for (auto& t : threads) t.join();
  for (int r = 0; r < R; ++r)
    if (!errors[r].empty()) throw Error("rank " + std::to_string(r) + ": " + errors[r]);
  return peaks;
}

std::string join(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : " ") + std::to_string(x);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int R = 4, M = 0;
  if (!dualpipe::bench::parse_options(argc, argv, {{"--ranks", &R}, {"--microbatches", &M}},
                                      "usage: bench_runtime_memory [--ranks R] [--microbatches M]"))
    return 2;
  if (M == 0) M = 2 * R;
  std::printf("Peak live stage activations per rank, measured in the runtime vs simulated (R=%d, M=%d)\n\n", R, M);
  std::printf("%-18s %-24s %-24s %s\n", "schedule", "measured (rank 0..R-1)", "simulated", "measured/simulated");
  int mismatches = 0;
  for (const auto& g : generators()) {
    const std::string kind(g.name);
    try {
      Schedule schedule = make_schedule(kind, {R, M});
      std::vector<int> measured = measure(schedule), simulated = peak_activations(schedule);
      int peak_measured = *std::max_element(measured.begin(), measured.end());
      int peak_simulated = *std::max_element(simulated.begin(), simulated.end());
      bool equal = measured == simulated;
      mismatches += equal ? 0 : 1;
      std::printf("%-18s %-24s %-24s %.3f %s\n", kind.c_str(), join(measured).c_str(), join(simulated).c_str(),
                  static_cast<double>(peak_measured) / peak_simulated, equal ? "(equal on every rank)" : "(DIFFER)");
    } catch (const std::exception& e) {
      std::printf("%-18s skipped: %s\n", kind.c_str(), e.what());
    }
  }
  std::printf("\n%s\n", mismatches == 0 ? "every schedule: measured == simulated on every rank"
                                        : "some schedules differ (see above)");
  return mismatches == 0 ? 0 : 1;
}
