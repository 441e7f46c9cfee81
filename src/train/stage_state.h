// One pipeline stage as the trainer holds it: the module and its own AdamW. An optimizer per stage (not per
// rank) makes a stage's checkpoint shard self-contained, so a run with another schedule but the same cut can
// load it whichever rank now holds the stage.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dualpipe/models/gpt.h"
#include "dualpipe/parallel/stage_parameters.h"
#include "dualpipe/train/train_config.h"
#include "job_groups.h"

namespace dualpipe::train {

// A stage's shard as save() makes it: the bytes, and the logical tensors in them with their whole shapes.
struct SavedStage {
  std::string bytes;
  std::vector<std::pair<std::string, std::vector<int64_t>>> tensors;
};

// Reads a saved tensor by key ("parameter.<name>", "adam.<name>.exp_avg", ...) into `out`, wherever in a
// checkpoint it lies; false when the checkpoint has none (a parameter not stepped yet has no optimizer state).
// Throws InvalidArgument naming the shard when it cannot be read.
using SavedTensors = std::function<bool(const std::string& key, torch::Tensor& out)>;

struct StageState {
  models::GptStage module{nullptr};
  std::unique_ptr<torch::optim::AdamW> optimizer;
  models::TensorGroup tp;  // the group its layers are split over (null: whole)

  // `groups`: the expert-parallel group of the stage's MoE layers (null: every expert here), the tensor-parallel
  // group its layers are split over (null: whole) and the context-parallel group its attention runs over (null:
  // none). The parameters, and with them the optimizer state, live on `device`.
  StageState(const run::OptimizerConfig& optimizer, const models::GptConfig& model, const models::StageCut& cut, int stage,
             const LayerGroups& groups = {}, c10::Device device = c10::kCPU);
  void set_lr(double lr);
  // Parameters and optimizer state, serialized (a checkpoint shard), and back. A shard holds whole tensors under
  // their global names whatever the tensor parallelism: save gathers the group's slices (collective over it; every
  // rank of the group returns the same bytes) and load keeps this rank's slices of the tensors it finds in
  // `saved`, which may come from the shards of any layout. load throws InvalidArgument naming `what` when a tensor
  // is missing or has another shape.
  SavedStage save() const;
  void load(const SavedTensors& saved, const std::string& what);

  // The stage as data parallelism and ZeRO see it: its parameters, how the mesh splits each, its AdamW.
  parallel::StageParameters parallel_view();
};

// Every stage's view, by stage. The tensors and the optimizers stay the stages': load a checkpoint into them
// (copy_, set_data) without making the view again.
parallel::Stages parallel_view(std::map<int, StageState>& stages);

}  // namespace dualpipe::train
