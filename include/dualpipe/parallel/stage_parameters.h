// A pipeline stage's tensors as data parallelism, ZeRO and the gradient norm handle them. The trainer's stages are
// modules of models/, which this layer does not know: it sees each stage as its parameters by name, how the mesh
// splits each of them, and the AdamW that steps them.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <string>

namespace dualpipe::parallel {

// How the mesh holds a parameter: whole on every rank of its tensor-parallel group, in slices over that group, or
// as an expert, on the members of its expert-parallel group that hold that expert.
enum class ParameterSplit { Whole, TensorSlices, Expert };

struct StageParameters {
  torch::OrderedDict<std::string, torch::Tensor> parameters;  // the module's own tensors: views, not copies
  torch::optim::AdamW* optimizer = nullptr;                   // steps them; the caller's
  std::function<ParameterSplit(const std::string& name)> split;
};

// By stage: the stages one pipeline rank holds.
using Stages = std::map<int, StageParameters>;

// AdamW's state of `parameter` (null: not stepped yet).
const torch::optim::AdamWParamState* adam_state(const torch::optim::AdamW& optimizer, const torch::Tensor& parameter);
// Sets it, on the parameter's device (a checkpoint's, or an owner's under ZeRO).
void set_adam_state(torch::optim::AdamW& optimizer, const torch::Tensor& parameter, int64_t step,
                    const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq);
// Drops it (ZeRO: another replica owns the parameter).
void drop_adam_state(torch::optim::AdamW& optimizer, const torch::Tensor& parameter);
// The bytes of AdamW's moment estimates held for `stage`'s parameters.
int64_t optimizer_state_bytes(const StageParameters& stage);

}  // namespace dualpipe::parallel
