// The mixture-of-experts layer against a reference written out token by token in double precision (routing,
// capacity in choice-major order, gated sum of GELU experts, the Switch load-balancing loss and its gradient by
// finite differences), and its experts sharded over an EP group of two ranks (threads over Gloo) against the
// same layer holding every expert in one process, and its micro-batches' sequences split over context- or
// sequence-parallel ranks against the whole micro-batch in one process.
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <thread>

#include "dualpipe/models/gpt.h"
#include "dualpipe/models/moe.h"
#include "dualpipe/parallel/process_groups.h"
#include "dualpipe/util/error.h"

namespace dualpipe::models {
namespace {

constexpr int64_t kHidden = 8;

MoeConfig config(int64_t experts, int64_t top_k, double capacity_factor, double aux_weight) {
  MoeConfig c;
  c.experts = experts;
  c.top_k = top_k;
  c.capacity_factor = capacity_factor;
  c.aux_loss_weight = aux_weight;
  return c;
}

using Params = std::map<std::string, torch::Tensor>;

Params doubles(const torch::nn::Module& layer) {
  Params p;
  for (const auto& item : layer.named_parameters()) p[item.key()] = item.value().detach().to(torch::kDouble);
  return p;
}

double gelu(double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }

struct Reference {
  std::vector<std::vector<double>> y;  // [T][hidden]
  int64_t dropped = 0;
  double aux = 0;
};

// The layer's forward, one token and one choice at a time.
Reference reference(const Params& p, const torch::Tensor& tokens, const MoeConfig& c) {
  const int64_t T = tokens.size(0), N = c.experts, k = c.top_k;
  const auto x = tokens.to(torch::kDouble);
  const auto capacity = static_cast<int64_t>(std::ceil(c.capacity_factor * double(T * k) / double(N)));
  std::vector<std::vector<double>> probs(T, std::vector<double>(N));
  std::vector<std::vector<int64_t>> chosen(T);
  std::vector<std::vector<double>> gates(T);
  for (int64_t t = 0; t < T; ++t) {
    const auto logits = p.at("router.weight").matmul(x[t]);
    double max = -INFINITY, sum = 0;
    for (int64_t e = 0; e < N; ++e) max = std::max(max, logits[e].item<double>());
    for (int64_t e = 0; e < N; ++e) sum += probs[t][e] = std::exp(logits[e].item<double>() - max);
    for (double& q : probs[t]) q /= sum;
    std::vector<int64_t> order(N);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return probs[t][a] > probs[t][b]; });
    double picked = 0;
    for (int64_t j = 0; j < k; ++j) picked += probs[t][order[j]];
    for (int64_t j = 0; j < k; ++j) {
      chosen[t].push_back(order[j]);
      gates[t].push_back(k > 1 ? probs[t][order[j]] / picked : probs[t][order[j]]);
    }
  }
  Reference r;
  r.y.assign(T, std::vector<double>(kHidden, 0.0));
  std::vector<int64_t> taken(N, 0);
  for (int64_t j = 0; j < k; ++j) {  // every first choice before any second one
    for (int64_t t = 0; t < T; ++t) {
      const int64_t e = chosen[t][j];
      if (taken[e]++ >= capacity) {
        ++r.dropped;
        continue;
      }
      const std::string name = "expert" + std::to_string(e);
      const auto hidden = p.at(name + ".fc1.weight").matmul(x[t]) + p.at(name + ".fc1.bias");
      std::vector<double> h(hidden.size(0));
      for (int64_t i = 0; i < hidden.size(0); ++i) h[i] = gelu(hidden[i].item<double>());
      const auto out = p.at(name + ".fc2.weight").matmul(torch::tensor(h, torch::kDouble)) + p.at(name + ".fc2.bias");
      for (int64_t i = 0; i < kHidden; ++i) r.y[t][i] += gates[t][j] * out[i].item<double>();
    }
  }
  for (int64_t e = 0; e < N; ++e) {
    double fraction = 0, mean_prob = 0;
    for (int64_t t = 0; t < T; ++t) {
      fraction += double(std::count(chosen[t].begin(), chosen[t].end(), e)) / double(T * k);
      mean_prob += probs[t][e] / double(T);
    }
    r.aux += double(N) * fraction * mean_prob;
  }
  return r;
}

torch::Tensor random_tokens(int64_t rows, int64_t length, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randn({rows, length, kHidden}, gen);
}

TEST(MoeLayer, MatchesTheTokenByTokenReferenceWithDroppedChoices) {
  for (int64_t top_k : {1, 2}) {
    const MoeConfig c = config(4, top_k, 0.75, 0.0);  // capacity below an even share: some choices dropped
    MoeLayer layer(c, kHidden, /*seed=*/7, /*layer=*/0, /*layers=*/2, nullptr);
    const torch::Tensor x = random_tokens(2, 6, 11);
    torch::Tensor y;
    {
      torch::NoGradGuard no_grad;
      y = layer(x).reshape({-1, kHidden});
    }
    const Reference r = reference(doubles(*layer), x.reshape({-1, kHidden}), c);
    EXPECT_GT(r.dropped, 0);
    EXPECT_EQ(layer->stats().dropped, r.dropped) << "top-" << top_k;
    EXPECT_EQ(layer->stats().choices, 12 * top_k);
    EXPECT_NEAR(layer->stats().mean_aux_loss(), r.aux, 1e-6);
    for (int64_t t = 0; t < 12; ++t)
      for (int64_t i = 0; i < kHidden; ++i)
        EXPECT_NEAR(y[t][i].item<double>(), r.y[t][i], 1e-5) << "top-" << top_k << " token " << t << " dim " << i;
  }
}

TEST(MoeLayer, TheAuxiliaryLossAddsItsWeightedGradientWithoutChangingTheOutput) {
  const MoeConfig with = config(4, 2, 2.0, 0.5), without = config(4, 2, 2.0, 0.0);
  MoeLayer a(with, kHidden, 3, 1, 2, nullptr), b(without, kHidden, 3, 1, 2, nullptr);
  const torch::Tensor x = random_tokens(1, 10, 5);
  const torch::Tensor ya = a(x), yb = b(x);
  EXPECT_TRUE(torch::equal(ya, yb));
  ya.sum().backward();
  yb.sum().backward();
  const torch::Tensor extra = (a->named_parameters()["router.weight"].grad() -
                               b->named_parameters()["router.weight"].grad()).to(torch::kDouble);
  // d(aux)/d(router weight) by central differences of the reference (the routing does not change for small steps).
  Params p = doubles(*a);
  const torch::Tensor tokens = x.reshape({-1, kHidden});
  const double step = 1e-5;
  for (int64_t e = 0; e < 4; ++e) {
    for (int64_t i = 0; i < kHidden; ++i) {
      Params up = p, down = p;
      up["router.weight"] = p["router.weight"].clone();
      down["router.weight"] = p["router.weight"].clone();
      up["router.weight"][e][i] += step;
      down["router.weight"][e][i] -= step;
      const double numeric = (reference(up, tokens, with).aux - reference(down, tokens, with).aux) / (2 * step);
      EXPECT_NEAR(extra[e][i].item<double>(), 0.5 * numeric, 1e-5) << "router weight [" << e << "][" << i << "]";
    }
  }
}

TEST(MoeLayer, ExpertsShardedOverTwoRanksComputeWhatOneProcessComputes) {
  // The ranks' thread count for the whole layer too, whatever the tests before this one in the process ran with: a
  // sum split over threads rounds otherwise.
  at::set_num_threads(1);
  const MoeConfig c = config(4, 2, 1.0, 0.01);
  const parallel::ProcessMesh mesh({1, 2, 2});
  auto store = c10::make_intrusive<c10d::HashStore>();
  const std::vector<torch::Tensor> inputs = {random_tokens(2, 5, 1), random_tokens(2, 5, 2)};
  std::vector<torch::Tensor> outputs(2), input_grads(2);
  std::vector<Params> expert_grads(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      at::set_num_threads(1);
      const parallel::MeshGroups groups = parallel::make_gloo_mesh_groups(store, mesh, r, std::chrono::seconds(30), "lo");
      auto communication = std::make_shared<parallel::ExpertCommunication>();
      communication->forward = groups.expert;
      communication->backward = groups.expert_backward;
      MoeLayer layer(c, kHidden, 9, 0, 1, communication);
      const torch::Tensor x = inputs[r].clone().requires_grad_();
      outputs[r] = layer(x);
      outputs[r].sum().backward();
      input_grads[r] = x.grad();
      for (const auto& p : layer->named_parameters())
        if (is_expert_parameter("block0.moe." + p.key())) expert_grads[r][p.key()] = p.value().grad();
    });
  }
  for (auto& t : ranks) t.join();

  MoeLayer whole(c, kHidden, 9, 0, 1, nullptr);
  for (int r = 0; r < 2; ++r) {
    const torch::Tensor x = inputs[r].clone().requires_grad_();
    const torch::Tensor y = whole(x);
    EXPECT_TRUE(torch::equal(y, outputs[r])) << "rank " << r << " output";
    y.sum().backward();
    EXPECT_TRUE(torch::equal(x.grad(), input_grads[r])) << "rank " << r << " input gradient";
  }
  // Rank 0 holds experts 0 and 1, rank 1 experts 2 and 3, each with both ranks' tokens in its gradient.
  EXPECT_EQ(expert_grads[0].size(), 8u);  // 2 experts x fc1, fc2 x weight, bias
  int compared = 0;
  for (const auto& p : whole->named_parameters()) {
    if (!is_expert_parameter("block0.moe." + p.key())) continue;
    const int holder = p.key().rfind("expert0", 0) == 0 || p.key().rfind("expert1", 0) == 0 ? 0 : 1;
    ASSERT_TRUE(expert_grads[holder].count(p.key())) << p.key();
    EXPECT_TRUE(torch::allclose(expert_grads[holder][p.key()], p.value().grad(), 1e-6, 1e-7)) << p.key();
    ++compared;
  }
  EXPECT_EQ(compared, 16);
}

// Sequences split over `ranks` ranks (threads over Gloo) as the trainer splits them, zig-zag over a context-parallel
// group or in contiguous parts over a sequence-parallel tensor group, with a capacity that drops choices: each rank's
// tokens must take the places in the experts' queues they take in the whole micro-batch, so the outputs, the
// dropped choices, the auxiliary loss and (summed over the ranks) the gradients are one process's.
void expect_split_routes_as_whole_microbatch(int ranks, bool zigzag) {
  const std::string label = std::string(zigzag ? "CP " : "SP ") + std::to_string(ranks);
  at::set_num_threads(1);  // the ranks' count, as in ExpertsShardedOverTwoRanksComputeWhatOneProcessComputes
  const MoeConfig c = config(4, 2, 0.75, 0.5);
  const int64_t rows = 2, length = 4 * ranks;
  const torch::Tensor x = random_tokens(rows, length, 21), weights = random_tokens(rows, length, 22);
  MoeLayer whole(c, kHidden, 13, 0, 1, nullptr);
  const torch::Tensor whole_x = x.clone().requires_grad_();
  const torch::Tensor whole_y = whole(whole_x);
  (whole_y * weights).sum().backward();
  ASSERT_GT(whole->stats().dropped, 0);
  // Each rank's positions, written out: chunks r and 2C-1-r of 2C, or part r of C.
  const auto positions = [&](int r) {
    const int64_t n = length / (zigzag ? 2 * ranks : ranks);
    const torch::Tensor first = torch::arange(r * n, (r + 1) * n, torch::kLong);
    return zigzag ? torch::cat({first, torch::arange((2 * ranks - 1 - r) * n, (2 * ranks - r) * n, torch::kLong)})
                  : first;
  };

  const parallel::ProcessMesh mesh(zigzag ? parallel::ParallelDims{1, 1, 1, 1, ranks} : parallel::ParallelDims{1, 1, 1, ranks, 1});
  auto store = c10::make_intrusive<c10d::HashStore>();
  struct Rank {
    torch::Tensor y, input_grad;
    Params grads;
    MoeStats stats;
  };
  std::vector<Rank> got(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      at::set_num_threads(1);
      const parallel::MeshGroups groups = parallel::make_gloo_mesh_groups(store, mesh, r, std::chrono::seconds(30), "lo");
      std::shared_ptr<parallel::ContextParallelGroup> cp;
      std::shared_ptr<parallel::TensorParallelGroup> tp;
      if (zigzag) {
        cp = std::make_shared<parallel::ContextParallelGroup>();
        cp->group = groups.context;
        cp->backward = groups.context_backward;
      } else {
        tp = std::make_shared<parallel::TensorParallelGroup>();
        tp->group = groups.tensor;
        tp->backward = groups.tensor_backward;
        tp->sequence_parallel = true;
      }
      MoeLayer layer(c, kHidden, 13, 0, 1, nullptr, sequence_split(tp, cp));
      const torch::Tensor mine = positions(r);
      const torch::Tensor xl = x.index_select(1, mine).clone().requires_grad_();
      Rank& g = got[static_cast<size_t>(r)];
      g.y = layer(xl);
      (g.y * weights.index_select(1, mine)).sum().backward();
      g.input_grad = xl.grad();
      for (const auto& p : layer->named_parameters()) g.grads[p.key()] = p.value().grad();
      g.stats = layer->stats();
    });
  for (auto& t : threads) t.join();

  for (int r = 0; r < ranks; ++r) {
    const torch::Tensor mine = positions(r);
    const Rank& g = got[static_cast<size_t>(r)];
    EXPECT_TRUE(torch::allclose(g.y, whole_y.detach().index_select(1, mine), 1e-6, 1e-7)) << label << " rank " << r;
    EXPECT_TRUE(torch::allclose(g.input_grad, whole_x.grad().index_select(1, mine), 1e-6, 1e-7))
        << label << " rank " << r;
    EXPECT_EQ(g.stats.choices, whole->stats().choices) << label << " rank " << r;
    EXPECT_EQ(g.stats.dropped, whole->stats().dropped) << label << " rank " << r;
    EXPECT_NEAR(g.stats.mean_aux_loss(), whole->stats().mean_aux_loss(), 1e-6) << label << " rank " << r;
  }
  // Each rank's gradients hold its tokens' part (the router's, with the auxiliary loss's share): their sum is the
  // whole micro-batch's.
  int compared = 0;
  for (const auto& p : whole->named_parameters()) {
    torch::Tensor sum = torch::zeros_like(p.value());
    for (const Rank& g : got)
      if (g.grads.at(p.key()).defined()) sum += g.grads.at(p.key());
    EXPECT_TRUE(torch::allclose(sum, p.value().grad(), 1e-5, 1e-6)) << label << " " << p.key();
    ++compared;
  }
  EXPECT_EQ(compared, 1 + 4 * 4);  // the router, and 4 experts x fc1, fc2 x weight, bias
}

TEST(MoeLayer, SequencesSplitOverRanksRouteAsTheWholeMicrobatch) {
  for (int ranks : {2, 4})
    for (bool zigzag : {true, false}) expect_split_routes_as_whole_microbatch(ranks, zigzag);
}

TEST(MoeConfig, BadValuesAreNamed) {
  auto message = [](MoeConfig c) {
    try {
      c.check();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message(config(4, 5, 1.25, 0.01)),
            "--top-k 5 must be between 1 and --experts 4: each token chooses that many distinct experts");
  EXPECT_NE(message(config(4, 2, 0, 0.01)).find("--capacity-factor must be in (0, 64], got 0"), std::string::npos);
  EXPECT_NE(message(config(-1, 2, 1, 0.01)).find("--experts must be between 0"), std::string::npos);
  EXPECT_EQ(message(config(0, 9, 1, 0.01)), "accepted");  // dense: the MoE options do not apply
}

}  // namespace
}  // namespace dualpipe::models
