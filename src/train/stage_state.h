// One pipeline stage as the trainer holds it: the module and its own AdamW. An optimizer per stage (not per
// rank) makes a stage's checkpoint shard self-contained, so a run with another schedule but the same cut can
// load it whichever rank now holds the stage.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "dualpipe/models/gpt.h"
#include "dualpipe/train/train_config.h"

namespace dualpipe::train {

struct StageState {
  models::GptStage module{nullptr};
  std::unique_ptr<torch::optim::AdamW> optimizer;
  models::TensorGroup tp;  // the group its layers are split over (null: whole)

  // `experts`: the expert-parallel group of the stage's MoE layers (null: every expert here); `tp`: the
  // tensor-parallel group its layers are split over (null: whole). The parameters, and with them the optimizer
  // state, live on `device`.
  StageState(const TrainConfig& config, const models::GptConfig& model, const models::StageCut& cut, int stage,
             models::ExpertGroup experts = nullptr, c10::Device device = c10::kCPU, models::TensorGroup tp = nullptr);
  void set_lr(double lr);
  // Parameters and optimizer state, serialized (a checkpoint shard), and back. load throws InvalidArgument
  // naming `what` when the bytes do not hold this stage's tensors with these shapes. A shard holds whole tensors
  // whatever the tensor parallelism: save gathers the group's slices (collective over it; every rank of the
  // group returns the same bytes) and load keeps this rank's slices, so a checkpoint resumes under any --tp.
  std::string save() const;
  void load(const std::string& bytes, const std::string& what);

  // AdamW's state of `parameter` (null: not stepped yet), set or dropped: how ZeRO-1 shards it
  // (optimizer_sharding.h).
  const torch::optim::AdamWParamState* adam_state(const torch::Tensor& parameter) const;
  void set_adam_state(const torch::Tensor& parameter, int64_t step, torch::Tensor exp_avg, torch::Tensor exp_avg_sq);
  void drop_adam_state(const torch::Tensor& parameter);
  // The bytes of AdamW's moment estimates held here.
  int64_t optimizer_state_bytes() const;
};

}  // namespace dualpipe::train
