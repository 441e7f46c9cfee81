// The collectives of Megatron-style tensor parallelism (Shoeybi et al., "Megatron-LM", 2019), differentiable: a
// layer split over the T ranks of a tensor-parallel group (mesh.h) takes its input through f and gives its
// output through g.
//   f (copy_to_tensor_parallel): the identity forward; the backward sums the input gradients of the T ranks,
//     each of which saw only its own slice of the layer.
//   g (reduce_from_tensor_parallel): the forward sums the T ranks' partial outputs; the identity backward.
// A column-parallel layer (its output features split) follows f, a row-parallel one (its input features split)
// comes before g, so a block (attention, or the MLP) costs one all-reduce forward and one backward.
//
// One group carries both directions: a rank issues its tensor-parallel collectives from one thread at a time, in
// its schedule's order, the same on every member (the trainer refuses --tp with the MoE models whose overlapped
// halves run on two threads; the expert all-to-all keeps two groups for that reason).
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/types.h>

#include <memory>

namespace dualpipe::parallel {

struct TensorParallelGroup {
  c10::intrusive_ptr<c10d::ProcessGroup> group;  // MeshGroups::tensor

  int size() const { return group ? group->getSize() : 1; }
  int rank() const { return group ? group->getRank() : 0; }
};

// Shared by a stage's layers; null: no tensor parallelism. The group outlives the autograd graphs that use it.
using TensorGroup = std::shared_ptr<const TensorParallelGroup>;

// f and g above. With no group or a group of one, both return x.
torch::Tensor copy_to_tensor_parallel(const torch::Tensor& x, const TensorGroup& tp);
torch::Tensor reduce_from_tensor_parallel(const torch::Tensor& x, const TensorGroup& tp);
// The elementwise sum over the group, outside autograd.
torch::Tensor sum_over_tensor_parallel(const torch::Tensor& x, const TensorGroup& tp);
// The elementwise maximum over the group, outside autograd.
torch::Tensor max_over_tensor_parallel(const torch::Tensor& x, const TensorGroup& tp);
// The group's slices of `x` joined along the last dimension in tensor-rank order, outside autograd.
torch::Tensor gather_last_dim(const torch::Tensor& x, const TensorGroup& tp);

}  // namespace dualpipe::parallel
