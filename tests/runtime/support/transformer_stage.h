// A small pre-LayerNorm transformer cut into pipeline stages, built only from stock LibTorch layers (biased
// Linear, LayerNorm, Embedding, causal multi-head attention, GELU MLP), for the runtime tests of tensor-list
// stages, variable micro-batches and the generic input/weight split.
//
// Every stage takes and returns [hidden, mask]: hidden is [rows, tokens, width] floating point that carries a
// gradient, mask an additive [rows, 1, tokens, tokens] causal mask that carries none and passes through. The first stage
// takes [token ids, mask] instead and embeds them (token and position embeddings).
#pragma once

#include <torch/torch.h>

#include <vector>

#include "dualpipe/runtime/stage.h"

namespace dualpipe::testing {

struct TransformerShape {
  int64_t width = 16, heads = 2, vocab = 32, max_tokens = 8;
};

class TransformerStageImpl : public torch::nn::Module {
 public:
  // `first`: the stage that embeds token ids. Parameters are drawn from `seed` alone.
  TransformerStageImpl(const TransformerShape& shape, bool first, uint64_t seed);
  runtime::Tensors forward(const runtime::Tensors& inputs);

  // The same layers with the same parameter values (for the single-process reference).
  std::shared_ptr<TransformerStageImpl> copy() const;

 private:
  torch::Tensor attention(const torch::Tensor& x, const torch::Tensor& mask);

  TransformerShape shape_;
  bool first_;
  uint64_t seed_;
  torch::nn::Embedding tokens{nullptr}, positions{nullptr};
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  torch::nn::Linear qkv{nullptr}, proj{nullptr}, fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(TransformerStage);

// Token ids [rows, tokens] and the additive causal mask [rows, 1, tokens, tokens] (0 on and below the diagonal, -1e9
// above; one per row, so that a batch splits along dim 0 like the ids), drawn from `seed`.
runtime::Tensors transformer_inputs(const TransformerShape& shape, int64_t rows, int64_t tokens, uint64_t seed);
// Regression targets shaped like the last stage's hidden output.
torch::Tensor transformer_targets(const TransformerShape& shape, int64_t rows, int64_t tokens, uint64_t seed);

}  // namespace dualpipe::testing
