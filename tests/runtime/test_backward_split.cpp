// Issue 8, item 4: the generic input/weight split (src/runtime/backward_split.h) against the unsplit backward of
// the same module on the same input, for each layer kind a transformer is made of. The input gradient from I
// and the parameter gradients from W must be bit-identical to the unsplit ones, and I must leave every
// parameter gradient untouched (no weight work done early).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/CPUGeneratorImpl.h>

#include <functional>

#include "runtime/backward_split.h"

namespace dualpipe::runtime {
namespace {

struct Layer {
  std::shared_ptr<torch::nn::Module> module;
  std::function<torch::Tensor(const torch::Tensor&)> forward;
  torch::Tensor input;  // a leaf requiring grad, or integer ids
};

using LayerFactory = std::function<Layer()>;

void randomize(torch::nn::Module& m, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  torch::NoGradGuard no_grad;
  for (auto& p : m.parameters()) p.uniform_(-0.5, 0.5, gen);
}

torch::Tensor floats(std::vector<int64_t> shape, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn(shape, gen).requires_grad_(true);
}

void expect_split_matches_unsplit(const LayerFactory& make) {
  at::set_num_threads(1);
  Layer unsplit = make(), split = make();
  torch::Tensor y_ref = unsplit.forward(unsplit.input);
  torch::Tensor grad = torch::randn_like(y_ref);
  const std::vector<torch::Tensor> ref_in = detail::backward_full({y_ref}, {grad}, {unsplit.input});

  torch::Tensor y = split.forward(split.input);
  ASSERT_TRUE(torch::equal(y, y_ref));
  detail::DeferredWeightGrad weight;
  const std::vector<torch::Tensor> in = detail::backward_input({y}, {grad}, {split.input}, weight);
  for (const auto& p : split.module->named_parameters())
    EXPECT_FALSE(p.value().grad().defined()) << p.key() << " got its gradient during I";
  if (ref_in[0].defined()) {
    ASSERT_TRUE(in[0].defined());
    EXPECT_TRUE(torch::equal(in[0], ref_in[0])) << "input gradient differs";
  }
  weight.run();
  auto mine = split.module->named_parameters(), theirs = unsplit.module->named_parameters();
  for (const auto& p : theirs) {
    const torch::Tensor& g = mine[p.key()].grad();
    ASSERT_TRUE(g.defined()) << p.key() << " got no gradient at W";
    EXPECT_TRUE(torch::equal(g, p.value().grad())) << p.key() << " gradient differs from the unsplit backward";
  }
}

TEST(GenericSplit, LinearWithBias) {
  expect_split_matches_unsplit([] {
    torch::nn::Linear m(6, 5);
    randomize(*m, 1);
    return Layer{m.ptr(), [m](const torch::Tensor& x) mutable { return m(x); }, floats({3, 4, 6}, 2)};
  });
}

TEST(GenericSplit, LayerNorm) {
  expect_split_matches_unsplit([] {
    torch::nn::LayerNorm m(torch::nn::LayerNormOptions({6}));
    randomize(*m, 3);
    return Layer{m.ptr(), [m](const torch::Tensor& x) mutable { return m(x); }, floats({3, 4, 6}, 4)};
  });
}

TEST(GenericSplit, EmbeddingOfTokenIds) {
  // Ids need no gradient: I has nothing to compute, W all of it.
  expect_split_matches_unsplit([] {
    torch::nn::Embedding m(10, 6);
    randomize(*m, 5);
    auto gen = at::make_generator<at::CPUGeneratorImpl>(6);
    torch::Tensor ids = torch::randint(10, {3, 4}, gen, torch::TensorOptions().dtype(torch::kLong));
    return Layer{m.ptr(), [m](const torch::Tensor& x) mutable { return m(x); }, ids};
  });
}

TEST(GenericSplit, EmbeddingPlusInput) {
  // An embedding added to a hidden input: one parameter path outside the input's closure.
  expect_split_matches_unsplit([] {
    torch::nn::Embedding m(4, 6);
    randomize(*m, 7);
    return Layer{m.ptr(),
                 [m](const torch::Tensor& x) mutable { return x + m(torch::arange(4, torch::kLong)); },
                 floats({3, 4, 6}, 8)};
  });
}

TEST(GenericSplit, CausalMultiHeadAttention) {
  // LibTorch's own MultiheadAttention: one fused in_proj weight feeding q, k and v.
  expect_split_matches_unsplit([] {
    torch::nn::MultiheadAttention m(torch::nn::MultiheadAttentionOptions(8, 2));
    randomize(*m, 9);
    torch::Tensor mask = torch::full({4, 4}, -1e9).triu(1);
    return Layer{m.ptr(),
                 [m, mask](const torch::Tensor& x) mutable {
                   return std::get<0>(m->forward(x, x, x, {}, false, mask));
                 },
                 floats({4, 3, 8}, 10)};
  });
}

TEST(GenericSplit, GeluMlpWithResidual) {
  expect_split_matches_unsplit([] {
    auto m = std::make_shared<torch::nn::Module>();
    auto fc1 = m->register_module("fc1", torch::nn::Linear(6, 24));
    auto fc2 = m->register_module("fc2", torch::nn::Linear(24, 6));
    auto norm = m->register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({6})));
    randomize(*m, 11);
    return Layer{m,
                 [fc1, fc2, norm](const torch::Tensor& x) mutable {
                   return x + fc2->forward(torch::gelu(fc1->forward(norm->forward(x))));
                 },
                 floats({3, 4, 6}, 12)};
  });
}

// A custom autograd Function computing x W^T, counting its backward calls: a node the generic split would run twice
// (at I for the input, at W for the weight), as it does every weight node.
struct CountedLinear : torch::autograd::Function<CountedLinear> {
  static inline int backward_calls = 0;
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, torch::Tensor w) {
    ctx->save_for_backward({x, w});
    return x.matmul(w.t());
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    ++backward_calls;
    const auto saved = ctx->get_saved_variables();
    return {grads[0].matmul(saved[1]), grads[0].flatten(0, -2).t().matmul(saved[0].flatten(0, -2))};
  }
};

TEST(GenericSplit, NodesThatMustRunOnceRunTheWholeBackwardAtI) {
  at::set_num_threads(1);
  torch::nn::Linear linear(6, 6);  // an ordinary weight node before the custom one
  randomize(*linear, 13);
  torch::Tensor w = torch::randn({5, 6}).requires_grad_(true);
  auto forward = [&](const torch::Tensor& x) { return CountedLinear::apply(linear(x), w); };
  auto runs_once = [](const torch::autograd::Node& n) {
    return dynamic_cast<const torch::autograd::CppNode<CountedLinear>*>(&n) != nullptr;
  };

  torch::Tensor x_ref = floats({3, 4, 6}, 14), x = floats({3, 4, 6}, 14);
  torch::Tensor y_ref = forward(x_ref), grad = torch::randn_like(y_ref);
  const auto ref_in = detail::backward_full({y_ref}, {grad}, {x_ref});
  const torch::Tensor w_ref = w.grad().clone(), linear_ref = linear->weight.grad().clone();
  w.mutable_grad() = torch::Tensor();
  linear->zero_grad(true);

  CountedLinear::backward_calls = 0;
  detail::DeferredWeightGrad weight;
  const auto in = detail::backward_input({forward(x)}, {grad}, {x}, weight, runs_once);
  EXPECT_EQ(CountedLinear::backward_calls, 1) << "the custom node ran more than once";
  EXPECT_TRUE(weight.empty()) << "a backward holding a node that runs once was split";
  EXPECT_TRUE(torch::equal(in[0], ref_in[0]));
  EXPECT_TRUE(torch::equal(w.grad(), w_ref));
  EXPECT_TRUE(torch::equal(linear->weight.grad(), linear_ref));

  // Without the filter the split runs it twice (what the filter is for), with the same gradients.
  CountedLinear::backward_calls = 0;
  w.mutable_grad() = torch::Tensor();
  linear->zero_grad(true);
  torch::Tensor x2 = floats({3, 4, 6}, 14);
  detail::DeferredWeightGrad split;
  detail::backward_input({forward(x2)}, {grad}, {x2}, split);
  split.run();
  EXPECT_EQ(CountedLinear::backward_calls, 2);
  EXPECT_TRUE(torch::equal(w.grad(), w_ref));
}

// Passes the gradient through; its backward, the last of the input half, asks whether a tensor the graph saved
// above it is freed by then.
struct FreedBelow : torch::autograd::Function<FreedBelow> {
  static inline c10::weak_intrusive_ptr<c10::StorageImpl> watched{c10::intrusive_ptr<c10::StorageImpl>()};
  static inline bool watched_was_freed = false;
  static torch::Tensor forward(torch::autograd::AutogradContext*, torch::Tensor x) { return x.clone(); }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::variable_list grads) {
    watched_was_freed = watched.expired();
    return grads;
  }
};

// A node that is not a weight node (exp, saving its result) frees its saved tensors as soon as it has run, as in
// the unsplit backward, not at the end of I: the input half keeps the graph only for W's nodes (a lower peak).
TEST(GenericSplit, TheInputHalfFreesWhatOnlyItNeedsAsItRuns) {
  at::set_num_threads(1);
  torch::nn::Linear linear(6, 6);
  randomize(*linear, 15);
  auto loss = [&](const torch::Tensor& x) {
    torch::Tensor e = linear(FreedBelow::apply(x)).exp();
    FreedBelow::watched = e.storage().getWeakStorageImpl();  // held by exp's node alone once `e` goes
    return e.sum();
  };
  torch::Tensor x_ref = floats({4, 6}, 16), x = floats({4, 6}, 16);
  FreedBelow::watched_was_freed = false;
  detail::backward_full({loss(x_ref)}, {}, {x_ref});
  ASSERT_TRUE(FreedBelow::watched_was_freed) << "the reference: the unsplit backward frees exp's result on the way";
  const torch::Tensor weight_ref = linear->weight.grad().clone();
  linear->zero_grad(true);

  FreedBelow::watched_was_freed = false;
  detail::DeferredWeightGrad weight;
  const auto in = detail::backward_input({loss(x)}, {}, {x}, weight);
  EXPECT_TRUE(FreedBelow::watched_was_freed) << "I held exp's result to its end";
  weight.run();
  EXPECT_TRUE(torch::equal(in[0], x_ref.grad()));
  EXPECT_TRUE(torch::equal(linear->weight.grad(), weight_ref)) << "W lost what it needed";
}

}  // namespace
}  // namespace dualpipe::runtime
