#include "dualpipe/models/gpt.h"

#include <cmath>

#include "dualpipe/models/gpt_sharding.h"
#include "dualpipe/util/error.h"
#include "init.h"

namespace dualpipe::models {
namespace {

using init::generator;
using init::init_linear;
using init::kInitStd;

constexpr uint64_t kEmbeddingStream = 0;
constexpr uint64_t kHeadStream = 1;
constexpr uint64_t kFirstBlockStream = 1000;  // + layer

}  // namespace

void GptConfig::check() const {
  DUALPIPE_REQUIRE(vocab >= 2 && vocab <= 1 << 20, "the vocabulary must have 2 to 2^20 tokens, got ", vocab);
  DUALPIPE_REQUIRE(seq_len >= 1 && seq_len <= 65536, "--seq-len must be between 1 and 65536 tokens, got ", seq_len);
  DUALPIPE_REQUIRE(hidden >= 1 && hidden <= 65536, "--hidden must be between 1 and 65536, got ", hidden);
  DUALPIPE_REQUIRE(heads >= 1 && hidden % heads == 0, "--heads ", heads, " must divide --hidden ", hidden,
                   " (each head gets hidden/heads dimensions)");
  DUALPIPE_REQUIRE(layers >= 1 && layers <= 100000, "--layers must be between 1 and 100000, got ", layers);
  moe.check();
}

int64_t GptConfig::parameter_count() const {
  const int64_t h = hidden;
  const int64_t mlp = (h * 4 * h + 4 * h) + (4 * h * h + h);
  const int64_t ffn = moe.experts == 0 ? mlp : h * moe.experts + moe.experts * mlp;  // router and experts
  const int64_t block = 2 * 2 * h + (h * 3 * h + 3 * h) + (h * h + h) + ffn;
  return vocab * h + seq_len * h + layers * block + 2 * h + h * vocab;
}

std::shared_ptr<const SequenceSplit> sequence_split(const TensorGroup& tp, const ContextGroup& cp) {
  auto split = std::make_shared<SequenceSplit>();
  if (parallel::splits_context(cp)) {
    split->size = cp->size();
    split->rank = cp->rank();
    split->gather = [cp](const torch::Tensor& x) { return parallel::gather_over_context_parallel(x, cp); };
    split->positions = [size = cp->size()](int64_t tokens, int r, c10::Device device) {
      return parallel::context_positions(tokens, r, size, device);
    };
  } else if (parallel::splits_sequence(tp)) {
    split->size = tp->size();
    split->rank = tp->rank();
    split->gather = [tp](const torch::Tensor& x) { return torch::stack(parallel::all_gather(x, tp)); };
    split->positions = [size = tp->size()](int64_t tokens, int r, c10::Device device) {
      const int64_t n = tokens / size;
      return torch::arange(r * n, (r + 1) * n, torch::TensorOptions().dtype(torch::kLong).device(device));
    };
  } else {
    return nullptr;
  }
  return split;
}

GptBlockImpl::GptBlockImpl(const GptConfig& c, int layer, ExpertGroup experts, TensorGroup tp, ContextGroup cp)
    : tp_(std::move(tp)), cp_(std::move(cp)), local_heads_(c.heads / (tp_ ? tp_->size() : 1)), head_dim_(c.hidden / c.heads) {
  const int64_t h = c.hidden;
  ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({h})));
  qkv = register_module("qkv", torch::nn::Linear(h, 3 * h));
  proj = register_module("proj", torch::nn::Linear(h, h));
  ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({h})));
  if (c.moe.experts == 0) {
    fc1 = register_module("fc1", torch::nn::Linear(h, 4 * h));
    fc2 = register_module("fc2", torch::nn::Linear(4 * h, h));
  } else {
    moe_ = register_module("moe", MoeLayer(c.moe, h, c.seed, layer, c.layers, std::move(experts), sequence_split(tp_, cp_)));
  }
  torch::NoGradGuard no_grad;
  auto gen = generator(c.seed, kFirstBlockStream + static_cast<uint64_t>(layer));
  const double residual_std = kInitStd / std::sqrt(2.0 * c.layers);
  init_linear(qkv, kInitStd, gen);
  init_linear(proj, residual_std, gen);
  if (moe_) return;
  init_linear(fc1, kInitStd, gen);
  init_linear(fc2, residual_std, gen);
}

torch::Tensor GptBlockImpl::row_parallel(torch::nn::Linear& layer, const torch::Tensor& x) {
  if (!tp_ || tp_->size() == 1) return layer(x);
  return parallel::leave_tensor_parallel(torch::nn::functional::linear(x, layer->weight), tp_) + layer->bias;
}

torch::Tensor GptBlockImpl::attention(const torch::Tensor& normed) {
  // This rank's heads (all of them without tensor parallelism), over the whole sequence.
  const torch::Tensor x = parallel::enter_tensor_parallel(normed, tp_);
  const int64_t rows = x.size(0), n = x.size(1), heads = local_heads_, d = head_dim_;
  auto parts = qkv(x).chunk(3, -1);
  auto split_heads = [&](const torch::Tensor& t) { return t.reshape({rows, n, heads, d}).transpose(1, 2); };
  const torch::Tensor q = split_heads(parts[0]), k = split_heads(parts[1]), v = split_heads(parts[2]);
  if (parallel::splits_context(cp_))  // this rank's queries against every rank's keys, around the ring
    return row_parallel(proj, parallel::ring_attention(q, k, v, cp_).transpose(1, 2).reshape({rows, n, heads * d}));
  // Causal: position i attends to positions <= i.
  const torch::Tensor future =
      torch::ones({n, n}, torch::TensorOptions().dtype(torch::kBool).device(x.device())).triu(1);
  const torch::Tensor scores =
      (torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d))).masked_fill(future, -INFINITY);
  const torch::Tensor mixed = torch::matmul(torch::softmax(scores, -1), v);
  return row_parallel(proj, mixed.transpose(1, 2).reshape({rows, n, heads * d}));
}

torch::Tensor GptBlockImpl::forward(const torch::Tensor& x) {
  if (moe_) {
    BlockInFlight block = start_moe(x);
    moe_->start_combine(*block.moe);
    return finish_moe(block);
  }
  const torch::Tensor y = x + attention(ln1(x));
  return y + row_parallel(fc2, torch::gelu(fc1(parallel::enter_tensor_parallel(ln2(y), tp_))));
}

BlockInFlight GptBlockImpl::start_moe(const torch::Tensor& x) {
  const torch::Tensor y = x + attention(ln1(x));
  return {x, y.view_as(y), moe_->start_dispatch(ln2(y))};
}

torch::Tensor GptBlockImpl::finish_moe(BlockInFlight& block) {
  return block.residual + moe_->finish_combine(*block.moe);
}

GptStageImpl::GptStageImpl(const GptConfig& config, const StageCut& cut, int stage, ExpertGroup experts,
                           TensorGroup tp, ContextGroup cp)
    : first_(stage == 0), last_(stage == cut.num_stages() - 1), tp_(std::move(tp)), cp_(std::move(cp)) {
  GptConfig c = config;
  if (!c.emulated_stages.empty()) {
    DUALPIPE_REQUIRE(static_cast<int>(c.emulated_stages.size()) == cut.num_stages(), "the emulated device has costs for ",
                     c.emulated_stages.size(), " stages, the cut ", cut.num_stages());
    c.moe.emulated = c.emulated_stages[stage];
  }
  c.check();
  DUALPIPE_REQUIRE(cut.num_layers() == c.layers, "the stage cut ", cut.to_string(), " has ", cut.num_layers(),
                   " layers, the model ", c.layers);
  DUALPIPE_REQUIRE(stage >= 0 && stage < cut.num_stages(), "stage ", stage, " is not one of the cut's ",
                   cut.num_stages());
  torch::NoGradGuard no_grad;
  if (first_) {
    tokens = register_module("tokens", torch::nn::Embedding(c.vocab, c.hidden));
    positions = register_module("positions", torch::nn::Embedding(c.seq_len, c.hidden));
    auto gen = generator(c.seed, kEmbeddingStream);
    tokens->weight.normal_(0, kInitStd, gen);
    positions->weight.normal_(0, kInitStd, gen);
  }
  const int first_layer = cut.first_layer(stage);
  for (int i = 0; i < cut.layers_per_stage[stage]; ++i)
    blocks_.push_back(
        register_module("block" + std::to_string(first_layer + i), GptBlock(c, first_layer + i, experts, tp_, cp_)));
  if (last_) {
    final_norm = register_module("final_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.hidden})));
    // Not tied to the token embedding: that would couple the first and last stages' weights across ranks.
    head = register_module("head", torch::nn::Linear(torch::nn::LinearOptions(c.hidden, c.vocab).bias(false)));
    auto gen = generator(c.seed, kHeadStream);
    head->weight.normal_(0, kInitStd, gen);
  }
  if (!tp_ || tp_->size() == 1) return;
  // Built whole from the seed above; each rank keeps its slices (gpt_sharding.h).
  for (auto& p : named_parameters())
    p.value().set_data(
        tensor_shard(p.key(), p.value(), tp_->rank(), tp_->size()).clone(at::MemoryFormat::Contiguous));
}

torch::Tensor GptStageImpl::embed_tokens(const torch::Tensor& ids) {
  if (!tp_ || tp_->size() == 1) return tokens(ids);
  // Ids outside this rank's slice look up row 0 and are zeroed; the sum over the group has one row per id.
  const int64_t rows = tokens->weight.size(0), start = tp_->rank() * rows;
  const torch::Tensor local = ids - start;
  const torch::Tensor elsewhere = (local < 0).logical_or(local >= rows);
  const torch::Tensor mine = tokens(local.masked_fill(elsewhere, 0)).masked_fill(elsewhere.unsqueeze(-1), 0);
  return parallel::leave_tensor_parallel(mine, tp_);
}

torch::Tensor GptStageImpl::embed(const torch::Tensor& ids) {
  TORCH_CHECK(ids.dim() == 2 && ids.size(1) <= positions->weight.size(0),
              "token ids must be [rows, tokens] with at most ", positions->weight.size(0), " tokens, got ", ids.sizes());
  torch::Tensor where = torch::arange(ids.size(1), torch::TensorOptions().dtype(torch::kLong).device(ids.device()));
  if (parallel::splits_sequence(tp_)) where = where.chunk(tp_->size()).at(static_cast<size_t>(tp_->rank()));
  if (parallel::splits_context(cp_))
    where = parallel::context_positions(ids.size(1) * cp_->size(), cp_->rank(), cp_->size(), ids.device());
  return embed_tokens(ids) + positions(where);
}

runtime::Tensors GptStageImpl::forward(const runtime::Tensors& inputs) {
  auto outputs = std::make_shared<runtime::Tensors>();
  for (const runtime::Phase& phase : forward_phases(inputs, outputs)) phase.run();
  return std::move(*outputs);
}

void GptStageImpl::sum_sequence_parallel_gradients() {
  if (!parallel::splits_sequence(tp_)) return;
  std::vector<torch::Tensor> whole;
  for (const auto& p : named_parameters())
    if (p.value().grad().defined() && tensor_split(p.key()) == TensorSplit::Whole) whole.push_back(p.value().grad());
  if (whole.empty()) return;
  const torch::Tensor sum = parallel::sum_over_tensor_parallel(torch::flatten_dense_tensors(whole), tp_);
  const std::vector<torch::Tensor> sums = torch::unflatten_dense_tensors(sum, whole);
  for (size_t i = 0; i < whole.size(); ++i) whole[i].copy_(sums[i]);
}

void GptStageImpl::sum_context_parallel_gradients() {
  if (!parallel::splits_context(cp_)) return;
  std::vector<torch::Tensor> gradients;
  for (const auto& p : parameters())
    if (p.grad().defined()) gradients.push_back(p.grad());
  if (gradients.empty()) return;
  const torch::Tensor sum = parallel::sum_over_context_parallel(torch::flatten_dense_tensors(gradients), cp_);
  const std::vector<torch::Tensor> sums = torch::unflatten_dense_tensors(sum, gradients);
  for (size_t i = 0; i < gradients.size(); ++i) gradients[i].copy_(sums[i]);
}

MoeStats GptStageImpl::moe_stats() const {
  MoeStats total;
  for (const auto& block : blocks_)
    if (block->moe()) total.add(block->moe()->stats());
  return total;
}

void GptStageImpl::reset_moe_stats() {
  for (auto& block : blocks_)
    if (block->moe()) block->moe()->reset_stats();
}

namespace {

// Mean cross entropy of `logits` [N, vocab / T], rank t's slice of the vocabulary, against `targets` [N].
torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets,
                                           const TensorGroup& tp) {
  const int64_t slice = logits.size(-1), start = tp->rank() * slice;
  // A constant shift for the exponentials: it leaves the loss and its gradient as they are.
  const torch::Tensor max = parallel::max_over_tensor_parallel(std::get<0>(logits.detach().max(-1)), tp);
  const torch::Tensor shifted = logits - max.unsqueeze(-1);
  const torch::Tensor local = targets - start;
  const torch::Tensor elsewhere = (local < 0).logical_or(local >= slice);
  const torch::Tensor target_logit =
      shifted.gather(-1, local.clamp(0, slice - 1).unsqueeze(-1)).squeeze(-1).masked_fill(elsewhere, 0);
  // Each rank's part of sum(exp) and its target logit (0 where another holds the target), summed over the group;
  // the sum's backward hands each rank the gradient of its own terms: softmax minus one-hot on its slice.
  const torch::Tensor sums =
      parallel::reduce_from_tensor_parallel(torch::stack({shifted.exp().sum(-1), target_logit}, -1), tp);
  return (sums.select(-1, 0).log() - sums.select(-1, 1)).mean();
}

}  // namespace

torch::Tensor next_token_loss(const torch::Tensor& logits, const torch::Tensor& targets, int num_microbatches,
                              const TensorGroup& tp) {
  const torch::Tensor flat_logits = logits.reshape({-1, logits.size(-1)}), flat_targets = targets.reshape({-1});
  const torch::Tensor loss = tp && tp->size() > 1 ? vocab_parallel_cross_entropy(flat_logits, flat_targets, tp)
                                                  : torch::cross_entropy_loss(flat_logits, flat_targets);
  return num_microbatches == 1 ? loss : loss / num_microbatches;
}

}  // namespace dualpipe::models
