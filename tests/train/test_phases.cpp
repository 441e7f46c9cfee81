// The phase-interleaved overlapped pair (runtime/phases.h, models::make_phased_stage) on the transformer's MoE stages,
// experts sharded over two ranks (threads over Gloo): its phases run in DeepSeek's published order, and it leaves
// what the forward followed by the backward leaves, bit for bit (outputs, input and parameter gradients), on the
// first stage (token ids in), a middle one and the last (its loss the backward's root), the forward half on the
// same stage or another. A lone backward as phases (PhasedStage::backward) likewise leaves autograd's results.
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/torch.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "dualpipe/models/gpt.h"
#include "dualpipe/parallel/process_groups.h"

namespace dualpipe::models {
namespace {

GptConfig moe_model() {
  GptConfig c;
  c.hidden = 16, c.heads = 2, c.seq_len = 8, c.layers = 6, c.seed = 3;
  c.moe.experts = 4, c.moe.top_k = 2, c.moe.aux_loss_weight = 0.01;
  return c;
}

// What one rank's stage left: the pair's forward outputs, the backward's input gradient and every parameter's.
struct Left {
  torch::Tensor outputs, input_grad;
  std::map<std::string, torch::Tensor> grads;
  std::vector<std::string> phases;  // "B:combine", "F:attn", ... (the interleaved pair only)
};

// A micro-batch's input to stage `s`: token ids on the first stage, hidden states (a leaf requiring grad) elsewhere.
torch::Tensor input(int s, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  if (s == 0) return torch::randint(256, {2, 8}, gen);
  return torch::randn({2, 8, 16}, gen).requires_grad_();
}

// The backward of `out_a`, stage `s`'s forward of `a`, as the executor hands it over: from the loss on the last stage,
// else from a random gradient of the output; `collect` leaves the input's gradient in `left`.
runtime::BackwardHalf backward_of(runtime::Stage* stage, const torch::Tensor& a, const torch::Tensor& out_a, int s,
                                  int rank, Left& left) {
  runtime::BackwardHalf backward;
  backward.owner = stage;
  backward.inputs = {a};
  if (s == 2) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(30 + rank);
    backward.roots = {next_token_loss(out_a, torch::randint(256, {2, 8}, gen))};
    backward.root_grads = {torch::Tensor()};
  } else {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(40 + rank);
    backward.roots = {out_a};
    backward.root_grads = {torch::randn(out_a.sizes(), gen)};
  }
  backward.body = [roots = backward.roots, root_grads = backward.root_grads] {
    torch::Tensor seed = root_grads[0].defined() ? root_grads[0] : torch::ones_like(roots[0]);
    torch::autograd::backward(roots, {seed});
  };
  backward.collect = [&left, a, s] { left.input_grad = s == 0 ? torch::Tensor() : a.grad(); };
  return backward;
}

void take_grads(const GptStage& module, Left& left) {
  for (const auto& p : module->named_parameters())
    if (p.value().grad().defined()) left.grads[p.key()] = p.value().grad();
}

// Stages `f` and `s` of three (as DualPipe pairs stages on a rank; the same one when equal): the forward of
// micro-batch A on `s`, then A's backward with the forward of B on `f`, interleaved phase by phase or (`phased`
// false) one after the other.
Left run_pair(const std::shared_ptr<parallel::ExpertCommunication>& experts, int f, int s, int rank, bool phased) {
  const GptConfig c = moe_model();
  const StageCut cut = StageCut::balanced(c.layers, 3);
  GptStage module(c, cut, s, experts);
  GptStage forward_module = f == s ? module : GptStage(c, cut, f, experts);
  const torch::Tensor a = input(s, 10 + rank), b = input(f, 20 + rank);
  Left left;
  std::shared_ptr<runtime::PhasedStage> stage = make_phased_stage(module);
  std::shared_ptr<runtime::PhasedStage> forward_stage = f == s ? stage : make_phased_stage(forward_module);
  forward_stage->observe_phases(
      [&](char chain, const std::string& name) { left.phases.push_back(chain + (":" + name)); });
  const torch::Tensor out_a = stage->forward({a})[0];
  const runtime::BackwardHalf backward = backward_of(stage.get(), a, out_a, s, rank, left);
  if (phased) {
    left.outputs = forward_stage->overlapped_forward_backward({b}, backward)[0];
  } else {
    left.outputs = forward_stage->forward({b})[0];
    backward.body();
    backward.collect();
  }
  take_grads(module, left);
  return left;
}

// Stage `s` of three: the forward of micro-batch A, then its backward on its own, as phases (PhasedStage::backward)
// or (`phased` false) autograd's whole.
Left run_lone_backward(const std::shared_ptr<parallel::ExpertCommunication>& experts, int s, int rank, bool phased) {
  const GptConfig c = moe_model();
  GptStage module(c, StageCut::balanced(c.layers, 3), s, experts);
  const torch::Tensor a = input(s, 10 + rank);
  Left left;
  std::shared_ptr<runtime::PhasedStage> stage = make_phased_stage(module);
  stage->observe_phases([&](char chain, const std::string& name) { left.phases.push_back(chain + (":" + name)); });
  const torch::Tensor out_a = stage->forward({a})[0];
  const runtime::BackwardHalf backward = backward_of(stage.get(), a, out_a, s, rank, left);
  if (phased) {
    stage->backward(backward);
  } else {
    backward.body();
    backward.collect();
  }
  take_grads(module, left);
  return left;
}

// Runs `body(rank, experts)` on two ranks (threads) whose experts are sharded over Gloo.
template <typename Body>
void on_two_ranks(Body body) {
  const parallel::ProcessMesh mesh({1, 2, 2});
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      at::set_num_threads(1);
      const parallel::MeshGroups groups =
          parallel::make_gloo_mesh_groups(store, mesh, r, std::chrono::seconds(30), "lo");
      auto experts = std::make_shared<parallel::ExpertCommunication>();
      experts->forward = groups.expert;
      experts->backward = groups.expert_backward;
      body(r, experts);
    });
  for (auto& t : ranks) t.join();
}

// The same outputs (when both have them), input gradient (stage `s` above the first) and parameter gradients.
void expect_bit_for_bit(const Left& phased, const Left& sequential, int s, const std::string& what) {
  if (sequential.outputs.defined()) {
    EXPECT_TRUE(torch::equal(phased.outputs, sequential.outputs)) << what;
  }
  if (s > 0) {
    ASSERT_TRUE(phased.input_grad.defined()) << what;
    EXPECT_TRUE(torch::equal(phased.input_grad, sequential.input_grad)) << what;
  }
  ASSERT_EQ(phased.grads.size(), sequential.grads.size()) << what;
  ASSERT_FALSE(phased.grads.empty()) << what;
  for (const auto& [name, grad] : sequential.grads) {
    ASSERT_TRUE(phased.grads.count(name)) << what << " " << name;
    EXPECT_TRUE(torch::equal(phased.grads.at(name), grad)) << what << " " << name;
  }
}

TEST(PhasedPair, RunsInDeepSeeksOrderAndLeavesTheSequentialResultsBitForBit) {
  at::set_num_threads(1);
  for (const std::pair<int, int>& stages : {std::pair{2, 0}, std::pair{1, 1}, std::pair{0, 2}}) {
    const int f = stages.first, s = stages.second;
    std::vector<Left> phased(2), sequential(2);
    on_two_ranks([&](int r, const std::shared_ptr<parallel::ExpertCommunication>& experts) {
      phased[r] = run_pair(experts, f, s, r, true);
      sequential[r] = run_pair(experts, f, s, r, false);
    });

    // Two layers a stage. DeepSeek's order for one layer on each side is
    //   combine(B) attn(F) mlp(B) mlp(W) mlp(F) attn(B) attn(W) combine(F);
    // each exchange started at the end of a phase is under way through the other chain's next phase. The
    // backward's combine W holds the head's parameter gradients on the last stage (nothing elsewhere); the last
    // attention's backward runs the rest of the stage whole.
    const std::vector<std::string> order = {
        "B:combine", "B:combine W", "F:attn", "B:mlp",     "B:mlp W",     "F:mlp", "B:attn",  "B:attn W",
        "B:combine", "B:combine W", "F:attn", "B:mlp",     "B:mlp W",     "F:mlp", "B:attn",  "F:combine"};
    for (int r = 0; r < 2; ++r) {
      const std::string what = "stages " + std::to_string(f) + "/" + std::to_string(s) + " rank " + std::to_string(r);
      EXPECT_EQ(phased[r].phases, order) << what;
      expect_bit_for_bit(phased[r], sequential[r], s, what);
    }
  }
}

TEST(PhasedBackward, ALoneBackwardRunsItsPhasesInOrderAndLeavesAutogradsResultsBitForBit) {
  at::set_num_threads(1);
  for (int s = 0; s < 3; ++s) {
    std::vector<Left> phased(2), whole(2);
    on_two_ranks([&](int r, const std::shared_ptr<parallel::ExpertCommunication>& experts) {
      phased[r] = run_lone_backward(experts, s, r, true);
      whole[r] = run_lone_backward(experts, s, r, false);
    });
    // Each exchange waited for by the next phase that computes: the experts' W runs while the dispatch's gradient
    // is under way.
    const std::vector<std::string> order = {"B:combine", "B:combine W", "B:mlp", "B:mlp W", "B:attn", "B:attn W",
                                            "B:combine", "B:combine W", "B:mlp", "B:mlp W", "B:attn"};
    for (int r = 0; r < 2; ++r) {
      const std::string what = "stage " + std::to_string(s) + " rank " + std::to_string(r);
      EXPECT_EQ(phased[r].phases, order) << what;
      EXPECT_TRUE(whole[r].phases.empty()) << what;
      expect_bit_for_bit(phased[r], whole[r], s, what);
    }
  }
}

}  // namespace
}  // namespace dualpipe::models
