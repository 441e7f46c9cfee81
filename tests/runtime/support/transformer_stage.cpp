#include "runtime/support/transformer_stage.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

namespace dualpipe::testing {

TransformerStageImpl::TransformerStageImpl(const TransformerShape& shape, bool first, uint64_t seed)
    : shape_(shape), first_(first), seed_(seed) {
  const int64_t w = shape.width;
  if (first) {
    tokens = register_module("tokens", torch::nn::Embedding(shape.vocab, w));
    positions = register_module("positions", torch::nn::Embedding(shape.max_tokens, w));
  }
  norm1 = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({w})));
  norm2 = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({w})));
  qkv = register_module("qkv", torch::nn::Linear(w, 3 * w));
  proj = register_module("proj", torch::nn::Linear(w, w));
  fc1 = register_module("fc1", torch::nn::Linear(w, 4 * w));
  fc2 = register_module("fc2", torch::nn::Linear(4 * w, w));
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  torch::NoGradGuard no_grad;
  // LayerNorm's ones and zeros would hide a wrong weight gradient; everything gets random values.
  for (auto& p : parameters()) p.uniform_(-0.4, 0.4, gen);
}

std::shared_ptr<TransformerStageImpl> TransformerStageImpl::copy() const {
  auto twin = std::make_shared<TransformerStageImpl>(shape_, first_, seed_);
  torch::NoGradGuard no_grad;
  auto src = parameters(), dst = twin->parameters();
  for (size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
  return twin;
}

torch::Tensor TransformerStageImpl::attention(const torch::Tensor& x, const torch::Tensor& mask) {
  const int64_t rows = x.size(0), n = x.size(1), h = shape_.heads, d = shape_.width / shape_.heads;
  auto parts = qkv(x).chunk(3, -1);
  auto heads = [&](const torch::Tensor& t) { return t.reshape({rows, n, h, d}).transpose(1, 2); };
  torch::Tensor q = heads(parts[0]), k = heads(parts[1]), v = heads(parts[2]);
  torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d)) + mask;
  torch::Tensor mixed = torch::matmul(torch::softmax(scores, -1), v);
  return proj(mixed.transpose(1, 2).reshape({rows, n, shape_.width}));
}

runtime::Tensors TransformerStageImpl::forward(const runtime::Tensors& inputs) {
  TORCH_CHECK(inputs.size() == 2, "a transformer stage takes [hidden or token ids, mask], got ", inputs.size());
  torch::Tensor x = inputs[0];
  const torch::Tensor& mask = inputs[1];
  if (first_) {
    torch::Tensor where = torch::arange(x.size(1), torch::TensorOptions().dtype(torch::kLong));
    x = tokens(x) + positions(where);
  }
  x = x + attention(norm1(x), mask);
  x = x + fc2(torch::gelu(fc1(norm2(x))));
  return {x, mask};
}

runtime::Tensors transformer_inputs(const TransformerShape& shape, int64_t rows, int64_t tokens, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  torch::Tensor ids = torch::randint(shape.vocab, {rows, tokens}, gen, torch::TensorOptions().dtype(torch::kLong));
  torch::Tensor mask = torch::full({tokens, tokens}, -1e9).triu(1).expand({rows, 1, tokens, tokens}).contiguous();
  return {ids, mask};
}

torch::Tensor transformer_targets(const TransformerShape& shape, int64_t rows, int64_t tokens, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn({rows, tokens, shape.width}, gen);
}

}  // namespace dualpipe::testing
