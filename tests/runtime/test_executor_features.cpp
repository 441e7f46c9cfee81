// Executor features beyond the plain reference check: deferred weight gradients, the overlapped F&B hook,
// pipelines on a sub-group of a larger job, modules without split-aware layers.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <memory>
#include <mutex>

#include "dualpipe/runtime/split_linear.h"
#include "dualpipe/runtime/weight_grad_store.h"
#include "dualpipe/schedule/data_parallel_lowering.h"
#include "dualpipe/schedule/generators.h"
#include "runtime/support/reference_model.h"
#include "runtime/support/thread_ranks.h"

namespace dualpipe::testing {
namespace {

TEST(SplitLinear, DefersWeightGradientWhileTheStoreIsDeferring) {
  torch::manual_seed(3);
  runtime::SplitLinear deferred(4, 6), direct(4, 6);
  {
    torch::NoGradGuard no_grad;
    direct->weight.copy_(deferred->weight);
  }
  auto x = torch::randn({3, 4});
  runtime::WeightGradStore store;
  runtime::WeightGradStore::Scope scope(&store);
  auto y = deferred->forward(x.clone().requires_grad_(true));
  store.begin_deferring(0, 5);
  y.sum().backward();
  store.end_deferring();
  EXPECT_FALSE(deferred->weight.grad().defined()) << "dW was computed during the I action";
  EXPECT_EQ(store.pending_groups(), 1u);
  store.run(0, 5);
  EXPECT_EQ(store.pending_groups(), 0u);
  direct->forward(x).sum().backward();  // not deferring: dW at once
  ASSERT_TRUE(deferred->weight.grad().defined());
  EXPECT_TRUE(torch::equal(deferred->weight.grad(), direct->weight.grad()));
}

// Counts its overlapped F&B calls, and those whose backward half came with its parameter gradients split off
// (BackwardHalf::weight), then does what the default does.
class CountingStage : public runtime::ModuleStage {
 public:
  CountingStage(runtime::MlpStage m, std::atomic<int>& calls, std::atomic<int>* split_halves = nullptr)
      : ModuleStage(m.ptr(), [m](const runtime::Tensors& x) mutable -> runtime::Tensors { return {m->forward(x[0])}; }),
        calls_(calls), split_halves_(split_halves) {}
  runtime::Tensors overlapped_forward_backward(const runtime::Tensors& input,
                                               const runtime::BackwardHalf& bwd) override {
    ++calls_;
    if (split_halves_ && bwd.weight) ++*split_halves_;
    return Stage::overlapped_forward_backward(input, bwd);
  }

 private:
  std::atomic<int>& calls_;
  std::atomic<int>* split_halves_;
};

void expect_matches_reference(const Schedule& schedule, int hub_ranks, const RankOptions& options) {
  ReferenceSetup setup = make_setup(schedule.num_stages, schedule.num_microbatches, 8, 2, 77);
  ReferenceResult reference = run_reference(setup, true);
  auto problems = run_ranks(hub_ranks, [&](std::shared_ptr<comm::Communicator> comm) {
    return run_and_check_rank(setup, reference, schedule, comm, true, true, options);
  });
  for (const auto& p : problems) ADD_FAILURE() << p;
}

int count_pairs(const Schedule& schedule) {
  int pairs = 0;
  for (const auto& rank : schedule.actions)
    for (const auto& a : rank) pairs += a.type == ActionType::Overlapped;
  return pairs;
}

TEST(Executor, CallsTheStagesOverlappedForwardBackward) {
  Schedule schedule = make_schedule("dualpipe", {2, 8});  // R=2, M=8 has overlapped pairs on both ranks
  std::atomic<int> calls{0};
  RankOptions options;
  options.wrap = [&](runtime::MlpStage m) { return std::make_shared<CountingStage>(m, calls); };
  expect_matches_reference(schedule, 2, options);
  const int pairs = count_pairs(schedule);
  EXPECT_GT(pairs, 0);
  EXPECT_EQ(calls.load(), pairs);
}

// The pairs' backward halves compute the input gradients first and the parameter gradients after them, and the
// step still gives the single-process reference's losses, outputs and gradients bit for bit.
TEST(Executor, PairsWithTheirWeightGradientsLastMatchTheReference) {
  Schedule schedule = make_schedule("dualpipe", {2, 8});
  std::atomic<int> calls{0}, split_halves{0};
  RankOptions options;
  options.pair_weights_last = true;
  options.wrap = [&](runtime::MlpStage m) { return std::make_shared<CountingStage>(m, calls, &split_halves); };
  expect_matches_reference(schedule, 2, options);
  const int pairs = count_pairs(schedule);
  EXPECT_EQ(split_halves.load(), pairs);

  split_halves = 0;  // off (the default), the halves come whole
  options.pair_weights_last = false;
  expect_matches_reference(schedule, 2, options);
  EXPECT_EQ(split_halves.load(), 0);
}

// ZeRO-3's use of the data-parallel actions, played by the test: every stage's parameters are taken away before the
// step, given back at wait_unsharded (once its UNSHARD has come) and taken away again at its RESHARD, and its
// REDUCE_GRAD comes once, after them. A stage that computed without its parameters, or after they went, would fail
// the step or its check against the single-process reference.
TEST(Executor, DataParallelActionsBracketEveryActionOfTheirStage) {
  for (const auto& [kind, microbatches] : std::vector<std::pair<std::string, int>>{
           {"1f1b", 4}, {"zb-h1", 4}, {"zbv", 4}, {"dualpipe", 8}, {"dualpipev", 4}, {"interleaved-1f1b", 4}}) {
    const Schedule schedule = add_reduce_grad(add_unshard_reshard(make_schedule(kind, {2, microbatches})),
                                              ReduceAt::LastGradient);
    std::mutex mutex;
    std::vector<std::string> problems;
    RankOptions options;
    options.before_step = [&](runtime::StepArgs& args, const std::map<int, runtime::MlpStage>& modules) {
      struct Held {
        std::vector<torch::Tensor> parameters, values;
        int unshard = 0, waited = 0, reshard = 0, reduced = 0;
      };
      auto held = std::make_shared<std::map<int, Held>>();
      for (const auto& [s, module] : modules)
        for (auto& p : module->parameters()) {
          (*held)[s].parameters.push_back(p);
          (*held)[s].values.push_back(p.detach().clone());
          p.set_data(torch::empty({0}));
        }
      auto complain = [&](int s, const char* what) {
        std::lock_guard<std::mutex> lock(mutex);
        problems.push_back(kind + ": stage " + std::to_string(s) + " " + what);
      };
      args.unshard = [held, complain](int s) {
        if (held->at(s).unshard++ > 0) complain(s, "was unsharded twice");
      };
      args.wait_unsharded = [held, complain](int s) {
        Held& h = held->at(s);
        if (h.unshard != 1 || h.waited++ > 0) complain(s, "was waited for twice or before its UNSHARD");
        for (size_t i = 0; i < h.parameters.size(); ++i) h.parameters[i].set_data(h.values[i]);
      };
      args.reshard = [held, complain](int s) {
        Held& h = held->at(s);
        if (h.waited != 1 || h.reshard++ > 0) complain(s, "was resharded twice or before it was waited for");
        for (auto& p : h.parameters) p.set_data(torch::empty({0}));
      };
      args.reduce_grad = [held, complain](int s) {
        Held& h = held->at(s);
        if (h.waited != 1 || h.reduced++ > 0) complain(s, "was reduced twice or before it computed");
        return runtime::StartedReduction{};
      };
    };
    expect_matches_reference(schedule, 2, options);
    for (const auto& p : problems) ADD_FAILURE() << p;
  }
}

TEST(Executor, PipelineOnASubGroupWithRankMapping) {
  Schedule schedule = make_schedule("dualpipe", {4, 8});
  RankOptions options;
  options.rank_mapping = {5, 1, 3, 0};  // communicator ranks 2 and 4 are not in the pipeline
  expect_matches_reference(schedule, 6, options);
}

// A stage of ordinary layers: weight gradients are computed during I and W has nothing to do.
struct PlainMlpImpl : torch::nn::Module {
  explicit PlainMlpImpl(int64_t h)
      : fc1(register_module("fc1", torch::nn::Linear(torch::nn::LinearOptions(h, 4 * h).bias(false)))),
        fc2(register_module("fc2", torch::nn::Linear(torch::nn::LinearOptions(4 * h, h).bias(false)))) {}
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::gelu(fc1(x))); }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(PlainMlp);

TEST(Executor, ModulesWithoutSplitAwareLayersStillTrain) {
  Schedule schedule = make_schedule("zb-h1", {2, 4});
  torch::manual_seed(5);
  std::vector<PlainMlp> model{PlainMlp(8), PlainMlp(8)};
  auto inputs = torch::randn({8, 8}), labels = torch::randn({8, 8});
  // Reference: whole model, micro-batch by micro-batch.
  std::vector<PlainMlp> ref{PlainMlp(8), PlainMlp(8)};
  for (int s = 0; s < 2; ++s) {
    torch::NoGradGuard no_grad;
    auto a = model[s]->parameters(), b = ref[s]->parameters();
    for (size_t i = 0; i < a.size(); ++i) b[i].copy_(a[i]);
  }
  std::vector<torch::Tensor> ref_losses;
  for (int m = 0; m < 4; ++m) {
    auto loss = torch::mse_loss(ref[1](ref[0](inputs.chunk(4)[m])), labels.chunk(4)[m]);
    loss.backward();
    ref_losses.push_back(loss.detach());
  }
  auto problems = run_ranks(2, [&](std::shared_ptr<comm::Communicator> comm) {
    at::set_num_threads(1);
    int r = comm->rank();
    runtime::Executor executor(schedule, {{r, runtime::make_stage(model[r])}}, comm);
    runtime::StepArgs args;
    if (r == 0) args.inputs = {inputs};
    if (r == 1) args.labels = {labels};
    args.criterion = runtime::single_tensor_criterion(mse);
    args.num_microbatches = 4;
    auto result = executor.step(args);
    std::vector<std::string> out;
    if (r == 1)
      for (int m = 0; m < 4; ++m)
        if (!torch::equal(result.losses[m], ref_losses[m])) out.push_back("loss " + std::to_string(m));
    auto a = model[r]->parameters(), b = ref[r]->parameters();
    for (size_t i = 0; i < a.size(); ++i)
      if (!(cosine_distance(a[i].grad(), b[i].grad()) <= 1e-13)) out.push_back("grad of stage " + std::to_string(r));
    return out;
  });
  for (const auto& p : problems) ADD_FAILURE() << p;
}

}  // namespace
}  // namespace dualpipe::testing
