// The collectives of Megatron-style tensor parallelism (Shoeybi et al., "Megatron-LM", 2019), differentiable: a
// layer split over the T ranks of a tensor-parallel group (mesh.h) takes its input through f and gives its
// output through g.
//   f (copy_to_tensor_parallel): the identity forward; the backward sums the input gradients of the T ranks,
//     each of which saw only its own slice of the layer.
//   g (reduce_from_tensor_parallel): the forward sums the T ranks' partial outputs; the identity backward.
// A column-parallel layer (its output features split) follows f, a row-parallel one (its input features split)
// comes before g, so a block (attention, or the MLP) costs one all-reduce forward and one backward.
//
// Sequence parallelism (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models",
// 2022) shards the rest of the block, the LayerNorms and the residual stream, along the sequence: rank t holds
// tokens [t n/T, (t+1) n/T). f becomes an all-gather along the sequence (its backward a reduce-scatter) and g a
// reduce-scatter (its backward an all-gather): the same bytes moved as the all-reduce, which is a reduce-scatter
// then an all-gather, while every activation outside the split layers is stored once across the group instead of
// T times. enter_tensor_parallel and leave_tensor_parallel pick f/g or their sequence-parallel forms.
//
// Forward passes run their collectives on one group and backward passes on another over the same ranks: with the
// MoE layers' forward-backward overlap (runtime/concurrent_overlap.h) a forward and a backward run at once on two
// threads, and c10d matches collectives by their order within a group, as for the expert all-to-all.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace dualpipe::parallel {

struct TensorParallelGroup {
  c10::intrusive_ptr<c10d::ProcessGroup> group;     // MeshGroups::tensor: forward passes, and outside a step
  c10::intrusive_ptr<c10d::ProcessGroup> backward;  // MeshGroups::tensor_backward (null: `group`)
  bool sequence_parallel = false;                 // the activations between split layers sharded by sequence
  // What a ring algorithm sends from each rank for every collective run on the group, in bytes: 2 (T-1)/T of an
  // all-reduce's tensor, (T-1)/T of an all-gather's gathered result or of a reduce-scatter's input (each rounded
  // to a byte).
  mutable std::atomic<int64_t> ring_bytes_sent{0};

  int size() const { return group ? group->getSize() : 1; }
  int rank() const { return group ? group->getRank() : 0; }
};

// Shared by a stage's layers; null: no tensor parallelism. The group outlives the autograd graphs that use it.
using TensorGroup = std::shared_ptr<const TensorParallelGroup>;

// f and g above. With no group or a group of one, both return x.
torch::Tensor copy_to_tensor_parallel(const torch::Tensor& x, const TensorGroup& tp);
torch::Tensor reduce_from_tensor_parallel(const torch::Tensor& x, const TensorGroup& tp);
// Sequence-parallel forms of f and g, along dimension 1 of [rows, tokens, ...]: all-gather of each rank's
// tokens / T (backward: reduce-scatter), and the sum of the ranks' partial [rows, tokens, ...] of which each keeps
// its tokens / T (backward: all-gather).
torch::Tensor gather_sequence(const torch::Tensor& x, const TensorGroup& tp);
torch::Tensor reduce_scatter_sequence(const torch::Tensor& x, const TensorGroup& tp);
// Into a tensor-parallel layer (f, or gather_sequence with sequence parallelism) and out of one (g, or
// reduce_scatter_sequence).
torch::Tensor enter_tensor_parallel(const torch::Tensor& x, const TensorGroup& tp);
torch::Tensor leave_tensor_parallel(const torch::Tensor& x, const TensorGroup& tp);
// Whether `tp` splits the sequence between the split layers.
inline bool splits_sequence(const TensorGroup& tp) { return tp && tp->size() > 1 && tp->sequence_parallel; }

// The elementwise sum over the group, outside autograd.
torch::Tensor sum_over_tensor_parallel(const torch::Tensor& x, const TensorGroup& tp);
// The elementwise maximum over the group, outside autograd.
torch::Tensor max_over_tensor_parallel(const torch::Tensor& x, const TensorGroup& tp);
// Every rank's `x` (of one shape), in tensor-rank order, outside autograd.
std::vector<torch::Tensor> all_gather(const torch::Tensor& x, const TensorGroup& tp);
// The group's slices of `x` joined along the last dimension in tensor-rank order, outside autograd.
torch::Tensor gather_last_dim(const torch::Tensor& x, const TensorGroup& tp);

}  // namespace dualpipe::parallel
