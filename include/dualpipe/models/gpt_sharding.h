// How the transformer's parameters (gpt.h) split over T tensor-parallel ranks, by parameter name, Megatron's way:
//   - qkv (column-parallel, by heads): rank t keeps the rows of its heads in each of q, k and v;
//   - fc1, and the token embedding and the head (by vocabulary): a slice of the rows (output features);
//   - proj and fc2 (row-parallel): a slice of the columns (input features); their biases are added once, after
//     the partial outputs are summed, so they stay whole;
//   - LayerNorms, the position embedding and MoE layers (router and experts): whole on every rank (their gradients
//     come out the same on each; experts are sharded by expert parallelism instead).
// A rank builds the whole model from the seed and keeps its slices, so its weights are one process's, whatever T.
#pragma once

#include <torch/types.h>

#include <string>
#include <vector>

namespace dualpipe::models {

enum class TensorSplit { Whole, Rows, Columns, QkvRows };

TensorSplit tensor_split(const std::string& name);

// Rank `rank`'s slice of parameter `name` (or of its gradient, or of any tensor of its shape) out of `size`;
// `full` itself when the parameter stays whole or `size` is 1.
torch::Tensor tensor_shard(const std::string& name, const torch::Tensor& full, int rank, int size);
// The whole parameter from every rank's slice, in tensor-rank order: the inverse of tensor_shard.
torch::Tensor tensor_unshard(const std::string& name, const std::vector<torch::Tensor>& slices);

}  // namespace dualpipe::models
