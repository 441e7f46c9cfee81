// A decoder-only transformer language model (GPT-2 style, as in nanoGPT): token and position embeddings,
// pre-LayerNorm blocks of causal multi-head self-attention and a GELU MLP, a final LayerNorm and the LM head,
// cut into pipeline stages by layer (stage_cut.h). The first stage also holds the embeddings, the last the final
// LayerNorm and the head.
//
// With MoeConfig::experts > 0 each block's MLP is a mixture of experts (moe.h), its experts optionally sharded
// over an expert-parallel group. With a tensor-parallel group of T ranks (parallel/tensor_parallel.h) a stage
// holds its rank's slices of every layer (gpt_sharding.h) and returns its slice of the vocabulary's logits.
//
// Every weight is drawn from the seed and the index of the layer that holds it, never from a global generator,
// so the model is the same whichever cut, schedule or rank builds it, and ranks may be threads.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "dualpipe/models/moe.h"
#include "dualpipe/models/stage_cut.h"
#include "dualpipe/parallel/context_parallel.h"
#include "dualpipe/parallel/tensor_parallel.h"
#include "dualpipe/runtime/phases.h"
#include "dualpipe/runtime/stage.h"

namespace dualpipe::models {

struct GptConfig {
  int64_t vocab = 256;   // byte-level tokens
  int64_t seq_len = 64;  // the longest context (position embeddings)
  int64_t hidden = 128;
  int64_t heads = 4;
  int layers = 8;
  uint64_t seed = 0;
  MoeConfig moe;  // experts = 0: dense MLPs
  // The emulated device's costs of one MoE layer of each stage (train --emulate-device); empty: none.
  std::vector<EmulatedLayer> emulated_stages;

  // Throws InvalidArgument naming the option (--hidden, --heads, ...) and the rule.
  void check() const;
  // Parameters of the whole model (every expert counted once).
  int64_t parameter_count() const;
};

using ExpertGroup = std::shared_ptr<const parallel::ExpertCommunication>;
using parallel::ContextGroup;
using parallel::TensorGroup;

// How a block's tokens are spread over ranks, for its MoE layer's routing (null: whole sequences on every rank):
// context parallelism's zig-zag chunks over `cp`, or else sequence parallelism's contiguous ones over `tp` (the MoE
// layer runs on the sequence-sharded residual stream, between the split layers).
std::shared_ptr<const SequenceSplit> sequence_split(const TensorGroup& tp, const ContextGroup& cp);

// An MoE block's forward of one micro-batch between its phases (GptBlockImpl::start_moe).
struct BlockInFlight {
  torch::Tensor input;
  torch::Tensor residual;  // x + attn(ln1(x)), through a node of its own (a cut for a backward run as phases)
  std::shared_ptr<MoeInFlight> moe;
};

// One pre-LayerNorm block: x + attn(ln1(x)), then + mlp(ln2(x)), the MLP dense or a mixture of experts.
class GptBlockImpl : public torch::nn::Module {
 public:
  // `tp`: the tensor-parallel group its layers are split over (null: whole); the stage keeps the slices. `cp`: the
  // context-parallel group its attention runs as a ring over (null: none).
  GptBlockImpl(const GptConfig& config, int layer, ExpertGroup experts = nullptr, TensorGroup tp = nullptr,
               ContextGroup cp = nullptr);
  torch::Tensor forward(const torch::Tensor& x);
  MoeLayer moe() const { return moe_; }  // null for a dense block
  // An MoE block's forward() as its MoE layer's phases: the attention and the dispatch's start here, then
  // moe()->start_combine(), then finish_moe() adds the combine's result to the residual.
  BlockInFlight start_moe(const torch::Tensor& x);
  torch::Tensor finish_moe(BlockInFlight& block);

 private:
  torch::Tensor attention(const torch::Tensor& normed);
  // A row-parallel layer: the partial products summed over the group, then the (whole) bias added once.
  torch::Tensor row_parallel(torch::nn::Linear& layer, const torch::Tensor& x);
  TensorGroup tp_;
  ContextGroup cp_;
  int64_t local_heads_, head_dim_;
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  torch::nn::Linear qkv{nullptr}, proj{nullptr}, fc1{nullptr}, fc2{nullptr};
  MoeLayer moe_{nullptr};
};
TORCH_MODULE(GptBlock);

// Stage `stage` of `cut`: takes [token ids [rows, tokens]] on the first stage and [hidden [rows, tokens,
// hidden]] elsewhere; returns [hidden], or [logits [rows, tokens, vocab]] on the last stage. `experts`: the
// expert-parallel group its MoE layers shard their experts over (null: every expert here). `tp`: the
// tensor-parallel group (null: no tensor parallelism); then the logits are rank t's slice [rows, tokens, vocab /
// T] of the vocabulary, and with sequence parallelism the hidden states between stages are rank t's tokens
// [rows, tokens / T, hidden] (the first stage still takes every token id). `cp`: the context-parallel group
// (null: none); then every stage takes and returns this rank's tokens (context_slice) of each sequence.
class GptStageImpl : public torch::nn::Module {
 public:
  GptStageImpl(const GptConfig& config, const StageCut& cut, int stage, ExpertGroup experts = nullptr,
               TensorGroup tp = nullptr, ContextGroup cp = nullptr);
  runtime::Tensors forward(const runtime::Tensors& inputs);

  // forward() as phases (runtime/phases.h): one from each expert exchange's start to the next one's (the first
  // with the embeddings, the last with the head), the forward's exchanges under way between them. A forward
  // under grad mode whose MoE layers exchange over a group is remembered by its input, for backward_phases.
  runtime::PhaseChain forward_phases(const runtime::Tensors& inputs, std::shared_ptr<runtime::Tensors> outputs);
  // The backward of the forward of `backward.inputs`, as phases: per MoE layer the combine's gradient, the
  // experts' and the attention's, each input gradients first, then parameter gradients. Empty when that forward
  // is not remembered (no grad mode, or no exchanges).
  runtime::PhaseChain backward_phases(const runtime::BackwardHalf& backward);

  bool first() const { return first_; }
  bool last() const { return last_; }
  // With sequence parallelism the gradients of the parameters every rank holds whole (LayerNorms, the row-parallel
  // biases, the position embedding) hold this rank's tokens only: sums them over the group. Call once the step's
  // backward is done; a no-op otherwise.
  void sum_sequence_parallel_gradients();
  // With context parallelism every gradient holds this rank's tokens' part of the loss: sums them over the group.
  // Call once the step's backward is done; a no-op otherwise.
  void sum_context_parallel_gradients();
  // The MoE layers' statistics since the last reset, summed (zero for a dense model).
  MoeStats moe_stats() const;
  void reset_moe_stats();

 private:
  // The token embedding of this rank's slice of the vocabulary, summed over the group.
  torch::Tensor embed_tokens(const torch::Tensor& ids);
  torch::Tensor embed(const torch::Tensor& ids);
  // Where a backward run as phases cuts each MoE block's graph, for each forward it may be asked to run
  // (gpt_phases.cpp). Held weakly: a forward whose backward runs otherwise leaves nothing alive.
  struct BlockPoints;
  struct PhaseRecords;
  std::shared_ptr<PhaseRecords> phase_records_;
  bool first_, last_;
  TensorGroup tp_;
  ContextGroup cp_;
  torch::nn::Embedding tokens{nullptr}, positions{nullptr};
  std::vector<GptBlock> blocks_;
  torch::nn::LayerNorm final_norm{nullptr};
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(GptStage);

// `stage` as a runtime stage whose overlapped forward-backward interleaves its halves phase by phase on one thread
// (runtime::PhasedStage): the default for MoE stages whose experts exchange over a group.
std::shared_ptr<runtime::PhasedStage> make_phased_stage(GptStage stage);

// Mean next-token cross-entropy (nats) of logits [rows, tokens, vocab] against targets [rows, tokens], divided
// by `num_microbatches`: the pipeline sums micro-batch gradients, so the step's gradient is the batch mean's.
// With a tensor-parallel group, `logits` is this rank's slice of the vocabulary and the cross entropy is
// Megatron's vocabulary-parallel one: the softmax's maximum and sum, and the target's logit, are reduced over the
// group (two all-reduces of [rows x tokens] values), never the logits themselves; every rank gets the whole loss.
torch::Tensor next_token_loss(const torch::Tensor& logits, const torch::Tensor& targets, int num_microbatches = 1,
                              const TensorGroup& tp = nullptr);

}  // namespace dualpipe::models
