// Context parallelism's ring attention (parallel/context_parallel.h) against plain causal attention over the whole
// sequence in one process: C ranks as threads, each with its zig-zag share of the queries, keys and values, must
// give that share of the output and of the gradients of q, k and v, to float rounding (the ring merges its blocks
// with a running maximum: another order of the same sums).
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/torch.h>

#include <cmath>
#include <thread>
#include <vector>

#include "dualpipe/parallel/context_parallel.h"
#include "dualpipe/parallel/process_groups.h"

namespace {

using namespace dualpipe::parallel;

TEST(ContextPositions, EachRankHoldsChunkCAndChunkTwoCMinusOneMinusC) {
  EXPECT_TRUE(torch::equal(context_positions(16, 0, 2), torch::tensor({0, 1, 2, 3, 12, 13, 14, 15}, torch::kLong)));
  EXPECT_TRUE(torch::equal(context_positions(16, 1, 2), torch::tensor({4, 5, 6, 7, 8, 9, 10, 11}, torch::kLong)));
  EXPECT_TRUE(torch::equal(context_positions(8, 2, 4), torch::tensor({2, 5}, torch::kLong)));
  EXPECT_THROW(context_positions(12, 0, 4), std::exception);  // 12 tokens do not make 8 chunks
}

struct Attention {
  torch::Tensor out, dq, dk, dv;
};

// softmax(q k^T / sqrt(d) + causal mask) v and the gradients of sum(out * weights).
Attention whole_sequence(const torch::Tensor& q0, const torch::Tensor& k0, const torch::Tensor& v0,
                         const torch::Tensor& weights) {
  torch::Tensor q = q0.clone().requires_grad_(true), k = k0.clone().requires_grad_(true),
                v = v0.clone().requires_grad_(true);
  const int64_t n = q.size(2);
  const torch::Tensor future = torch::ones({n, n}, torch::kBool).triu(1);
  const torch::Tensor scores = (torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(q.size(-1))))
                                   .masked_fill(future, -INFINITY);
  const torch::Tensor out = torch::matmul(torch::softmax(scores, -1), v);
  (out * weights).sum().backward();
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

void expect_ring_matches_whole_sequence(int ranks) {
  torch::manual_seed(11);
  const int64_t rows = 2, heads = 3, tokens = 8 * ranks, d = 4;
  const torch::Tensor q = torch::randn({rows, heads, tokens, d}), k = torch::randn({rows, heads, tokens, d}),
                      v = torch::randn({rows, heads, tokens, d}), weights = torch::randn({rows, heads, tokens, d});
  const Attention whole = whole_sequence(q, k, v, weights);

  const ProcessMesh mesh({1, 1, 1, 1, ranks});
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<Attention> got(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      at::set_num_threads(1);
      const MeshGroups groups = make_gloo_mesh_groups(store, mesh, r, std::chrono::seconds(30), "lo");
      auto group = std::make_shared<ContextParallelGroup>();
      group->group = groups.context;
      group->backward = groups.context_backward;
      const ContextGroup cp = group;
      const torch::Tensor mine = context_positions(tokens, r, ranks);
      auto slice = [&](const torch::Tensor& t) { return t.index_select(2, mine).clone().requires_grad_(true); };
      torch::Tensor ql = slice(q), kl = slice(k), vl = slice(v);
      const torch::Tensor out = ring_attention(ql, kl, vl, cp);
      (out * weights.index_select(2, mine)).sum().backward();
      got[static_cast<size_t>(r)] = {out.detach(), ql.grad(), kl.grad(), vl.grad()};
    });
  for (auto& t : threads) t.join();

  for (int r = 0; r < ranks; ++r) {
    const torch::Tensor mine = context_positions(tokens, r, ranks);
    const Attention& g = got[static_cast<size_t>(r)];
    ASSERT_TRUE(g.out.defined() && g.dq.defined() && g.dk.defined() && g.dv.defined()) << "rank " << r;
    EXPECT_TRUE(torch::allclose(g.out, whole.out.index_select(2, mine), 1e-5, 1e-6)) << "C=" << ranks << " rank " << r;
    EXPECT_TRUE(torch::allclose(g.dq, whole.dq.index_select(2, mine), 1e-5, 1e-6)) << "C=" << ranks << " rank " << r;
    EXPECT_TRUE(torch::allclose(g.dk, whole.dk.index_select(2, mine), 1e-5, 1e-6)) << "C=" << ranks << " rank " << r;
    EXPECT_TRUE(torch::allclose(g.dv, whole.dv.index_select(2, mine), 1e-5, 1e-6)) << "C=" << ranks << " rank " << r;
  }
}

TEST(RingAttention, GivesEachRankItsShareOfCausalAttentionAndItsGradients) {
  for (int ranks : {1, 2, 4}) expect_ring_matches_whole_sequence(ranks);
}

}  // namespace
