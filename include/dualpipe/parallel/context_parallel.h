// Context parallelism (CP): the sequence of every micro-batch split over the C ranks of a context-parallel group
// (mesh.h), for contexts too long for one device, as Megatron and Llama 3 do.
//
// The sequence is cut into 2C chunks and rank c holds chunks c and 2C-1-c (zig-zag): under a causal mask the early
// chunks attend to little and the late ones to much, so each rank gets one of each and the same share of the work.
// Everything but attention is per token and runs on the rank's own tokens; the position embedding takes their true
// positions.
//
// Attention runs as a ring (Liu et al., "Ring Attention with Blockwise Transformers", 2023): each rank keeps its
// queries, and the K/V blocks of the C ranks pass around the ring, each rank sending the block in hand to the next
// while it computes the scores of its queries against it. The blocks' results are merged with a running maximum and
// sum of the exponentials (the online softmax of FlashAttention), which is exact: the maximum is only a shift, so
// it is kept out of autograd. The backward passes the K/V gradients back around the ring (on a group of its own, as
// tensor parallelism does) and is the exact gradient of the forward.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/types.h>

#include <atomic>
#include <cstdint>
#include <memory>

namespace dualpipe::parallel {

struct ContextParallelGroup {
  c10::intrusive_ptr<c10d::ProcessGroup> group;     // MeshGroups::context: forward passes, and outside a step
  c10::intrusive_ptr<c10d::ProcessGroup> backward;  // MeshGroups::context_backward (null: `group`)
  // The bytes this rank sent around the ring: K/V blocks forward, their gradients backward; and what a ring sends
  // of gather_over_context_parallel's all-gathers.
  mutable std::atomic<int64_t> ring_bytes_sent{0};

  int size() const { return group ? group->getSize() : 1; }
  int rank() const { return group ? group->getRank() : 0; }
};

// Shared by a stage's layers; null: no context parallelism. The group outlives the autograd graphs that use it.
using ContextGroup = std::shared_ptr<const ContextParallelGroup>;

inline bool splits_context(const ContextGroup& cp) { return cp && cp->size() > 1; }

// The positions of rank `rank`'s tokens in a sequence of `tokens` (divisible by 2 x `size`): chunk `rank`, then
// chunk 2 x size - 1 - rank.
torch::Tensor context_positions(int64_t tokens, int rank, int size, c10::Device device = c10::kCPU);
// This rank's tokens of `x` [rows, tokens, ...]: [rows, tokens / C, ...] in context_positions' order. `x` itself
// without context parallelism.
torch::Tensor context_slice(const torch::Tensor& x, const ContextGroup& cp);

// Causal attention of this rank's queries over the whole sequence: q, k, v [rows, heads, tokens / C, head size]
// of this rank's tokens (context_slice order); returns softmax(q k^T / sqrt(d) + causal mask) v for its queries.
torch::Tensor ring_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const ContextGroup& cp);

// Every rank's `x` (the same shape on each), stacked in rank order: [C, ...], outside autograd. `x` unsqueezed
// without context parallelism.
torch::Tensor gather_over_context_parallel(const torch::Tensor& x, const ContextGroup& cp);

// The elementwise sum over the group, outside autograd.
torch::Tensor sum_over_context_parallel(const torch::Tensor& x, const ContextGroup& cp);

}  // namespace dualpipe::parallel
