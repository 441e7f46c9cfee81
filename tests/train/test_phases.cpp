// The phase-interleaved overlapped pair (runtime/phases.h, models::make_phased_stage) on the transformer's MoE stages,
// experts sharded over two ranks (threads over Gloo): its phases run in DeepSeek's published order, and it leaves
// what the forward followed by the backward leaves, bit for bit (outputs, input and parameter gradients), on the
// first stage (token ids in), a middle one and the last (its loss the backward's root), the forward half on the
// same stage or another.
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
  runtime::BackwardHalf backward;
  backward.owner = stage.get();
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
  backward.body = [&] {
    torch::Tensor seed = backward.root_grads[0].defined() ? backward.root_grads[0] : torch::ones_like(backward.roots[0]);
    torch::autograd::backward(backward.roots, {seed});
  };
  backward.collect = [&] { left.input_grad = s == 0 ? torch::Tensor() : a.grad(); };
  if (phased) {
    left.outputs = forward_stage->overlapped_forward_backward({b}, backward)[0];
  } else {
    left.outputs = forward_stage->forward({b})[0];
    backward.body();
    backward.collect();
  }
  for (const auto& p : module->named_parameters())
    if (p.value().grad().defined()) left.grads[p.key()] = p.value().grad();
  return left;
}

TEST(PhasedPair, RunsInDeepSeeksOrderAndLeavesTheSequentialResultsBitForBit) {
  at::set_num_threads(1);
  for (const std::pair<int, int>& stages : {std::pair{2, 0}, std::pair{1, 1}, std::pair{0, 2}}) {
    const int f = stages.first, s = stages.second;
    const parallel::ProcessMesh mesh({1, 2, 2});
    auto store = c10::make_intrusive<c10d::HashStore>();
    std::vector<Left> phased(2), sequential(2);
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r)
      ranks.emplace_back([&, r] {
        at::set_num_threads(1);
        const parallel::MeshGroups groups =
            parallel::make_gloo_mesh_groups(store, mesh, r, std::chrono::seconds(30), "lo");
        auto experts = std::make_shared<parallel::ExpertCommunication>();
        experts->forward = groups.expert;
        experts->backward = groups.expert_backward;
        phased[r] = run_pair(experts, f, s, r, true);
        sequential[r] = run_pair(experts, f, s, r, false);
      });
    for (auto& t : ranks) t.join();

    // Two layers a stage. DeepSeek's order for one layer on each side is
    //   combine(B) attn(F) mlp(B) mlp(W) mlp(F) attn(B) attn(W) combine(F);
    // each exchange started at the end of a phase is under way through the other chain's next phase. The
    // backward's combine W holds the head's parameter gradients on the last stage (nothing elsewhere); the last
    // attention's backward runs the rest of the stage whole.
    const std::vector<std::string> order = {
        "B:combine", "B:combine W", "F:attn", "B:mlp",     "B:mlp W",     "F:mlp", "B:attn",  "B:attn W",
        "B:combine", "B:combine W", "F:attn", "B:mlp",     "B:mlp W",     "F:mlp", "B:attn",  "F:combine"};
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(phased[r].phases, order) << "stages " << f << "/" << s << " rank " << r;
      EXPECT_TRUE(torch::equal(phased[r].outputs, sequential[r].outputs)) << "stages " << f << "/" << s << " rank " << r;
      if (s > 0) {
        ASSERT_TRUE(phased[r].input_grad.defined()) << "stage " << s;
        EXPECT_TRUE(torch::equal(phased[r].input_grad, sequential[r].input_grad)) << "stages " << f << "/" << s << " rank " << r;
      }
      ASSERT_EQ(phased[r].grads.size(), sequential[r].grads.size()) << "stage " << s;
      ASSERT_FALSE(phased[r].grads.empty());
      for (const auto& [name, grad] : sequential[r].grads) {
        ASSERT_TRUE(phased[r].grads.count(name)) << name;
        EXPECT_TRUE(torch::equal(phased[r].grads.at(name), grad)) << "stages " << f << "/" << s << " rank " << r << " " << name;
      }
    }
  }
}

}  // namespace
}  // namespace dualpipe::models
