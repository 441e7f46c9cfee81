// Issue 9, item 6: activation recomputation (ExecutorOptions::recompute). Every schedule kind trains the test
// transformer twice on the same micro-batches, with and without recomputation: losses and parameter gradients
// must be bit-identical (the same operations in the same order). The measured peak of activation bytes never
// grows, and drops wherever the simulator's memory model (activation_memory.h, recompute=1) says the peak drops
// by two stage activations or more: more than what this small test stage keeps per micro-batch under
// recomputation (its inputs and outputs are a larger share of its activations than a real layer's). Zero Bubble
// kinds whose peak is I's kept for their W keep it, since the W needs the rebuilt graph.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <mutex>

#include "dualpipe/runtime/executor.h"
#include "dualpipe/sim/activation_memory.h"
#include "runtime/support/kind_cases.h"
#include "runtime/support/reference_model.h"
#include "runtime/support/thread_ranks.h"
#include "runtime/support/transformer_stage.h"

namespace dualpipe::testing {
namespace {

using runtime::Tensors;

const TransformerShape kRecomputeShape;
constexpr uint64_t kRecomputeSeed = 900;

struct RankOutcome {
  std::vector<torch::Tensor> losses;                // by micro-batch, where this rank computed it
  std::map<int, std::vector<torch::Tensor>> grads;  // by stage
  int64_t peak_bytes = 0;
};

// One training step of `schedule` on every rank; outcomes indexed by rank.
std::vector<RankOutcome> train_step(const Schedule& schedule, bool recompute) {
  const int M = schedule.num_microbatches, S = schedule.num_stages;
  std::vector<Tensors> inputs, labels;
  for (int m = 0; m < M; ++m) {
    inputs.push_back(transformer_inputs(kRecomputeShape, 2, kRecomputeShape.max_tokens, 10 + m));
    labels.push_back({transformer_targets(kRecomputeShape, 2, kRecomputeShape.max_tokens, 100 + m)});
  }
  std::vector<RankOutcome> outcomes(schedule.num_ranks);
  std::mutex lock;
  const auto problems = run_ranks(
      schedule.num_ranks,
      [&](std::shared_ptr<comm::Communicator> comm) {
        at::set_num_threads(1);
        const int rank = comm->rank();
        std::map<int, TransformerStage> modules;
        std::map<int, std::shared_ptr<runtime::Stage>> stages;
        for (int m = 0; m < M; ++m)
          for (int s = 0; s < S; ++s)
            if (schedule.placement.rank(s, m) == rank && !modules.count(s)) {
              modules.emplace(s, TransformerStage(kRecomputeShape, s == 0, kRecomputeSeed + s));
              stages.emplace(s, runtime::make_list_stage(modules.at(s)));
            }
        runtime::ExecutorOptions options;
        options.recompute = recompute;
        options.measure_memory = true;
        runtime::Executor executor(schedule, stages, comm, options);
        runtime::StepArgs args;
        for (int m : executor.entering_microbatches()) args.microbatch_inputs.push_back(inputs[m]);
        for (int m : executor.loss_microbatches()) args.microbatch_labels.push_back(labels[m]);
        args.criterion = [](const Tensors& out, const Tensors& label) { return torch::mse_loss(out[0], label[0]); };
        args.num_microbatches = M;
        const runtime::StepResult result = executor.step(args);
        executor.reduce_replica_gradients();
        RankOutcome outcome;
        outcome.losses = result.losses;
        for (auto& [s, module] : modules)
          for (const auto& p : module->parameters()) outcome.grads[s].push_back(p.grad().clone());
        outcome.peak_bytes = executor.last_step_stats().peak_activation_bytes;
        std::lock_guard<std::mutex> guard(lock);
        outcomes[rank] = std::move(outcome);
        return std::vector<std::string>{};
      },
      std::chrono::seconds(60), /*single_tag=*/true);
  for (const auto& p : problems) ADD_FAILURE() << p;
  return outcomes;
}

class Recompute : public ::testing::TestWithParam<KindCase> {};

TEST_P(Recompute, SameLossesAndGradientsBitForBitWithFewerActivationBytes) {
  const Schedule schedule = make_case_schedule(GetParam().kind, GetParam().ranks);
  const auto plain = train_step(schedule, false), recomputed = train_step(schedule, true);
  int64_t plain_peak = 0, recomputed_peak = 0;
  for (int r = 0; r < schedule.num_ranks; ++r) {
    ASSERT_EQ(plain[r].losses.size(), recomputed[r].losses.size());
    for (size_t m = 0; m < plain[r].losses.size(); ++m) {
      ASSERT_EQ(plain[r].losses[m].defined(), recomputed[r].losses[m].defined()) << "rank " << r << " m " << m;
      if (plain[r].losses[m].defined()) {
        EXPECT_TRUE(torch::equal(plain[r].losses[m], recomputed[r].losses[m])) << "rank " << r << " loss " << m;
      }
    }
    for (const auto& [s, grads] : plain[r].grads)
      for (size_t i = 0; i < grads.size(); ++i)
        EXPECT_TRUE(torch::equal(grads[i], recomputed[r].grads.at(s)[i]))
            << "rank " << r << " stage " << s << " parameter " << i;
    plain_peak = std::max(plain_peak, plain[r].peak_bytes);
    recomputed_peak = std::max(recomputed_peak, recomputed[r].peak_bytes);
  }
  CostModel with_recompute;
  with_recompute.recompute = true;
  const std::vector<double> planned = activation_peaks(schedule, CostModel{}),
                            planned_recomputed = activation_peaks(schedule, with_recompute);
  const bool plan_drops = *std::max_element(planned_recomputed.begin(), planned_recomputed.end()) <=
                          *std::max_element(planned.begin(), planned.end()) - 2;
  EXPECT_LE(recomputed_peak, plain_peak) << "peak activation bytes, largest over ranks";
  if (plan_drops) {
    EXPECT_LT(recomputed_peak, plain_peak) << "the plan's peak drops, the measured one does not";
  }
}

INSTANTIATE_TEST_SUITE_P(AllKinds, Recompute, ::testing::ValuesIn(all_kind_cases()), case_name);

}  // namespace
}  // namespace dualpipe::testing
