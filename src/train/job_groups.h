// The c10d groups of a training job, made by every rank of its world: the process mesh's groups for --dp or --tp
// above 1,
// and with NCCL, or in NCCL's Gloo test mode (DUALPIPE_NCCL_RULES=1), the pipeline's two directional channels
// (comm/directional_communicator.h).
#pragma once

#include <c10/core/Device.h>

#include <chrono>
#include <map>
#include <memory>
#include <vector>

#include "device_choice.h"
#include "dualpipe/models/gpt.h"
#include "expert_timeline.h"
#include "dualpipe/comm/communicator.h"
#include "dualpipe/comm/gloo_communicator.h"
#include "dualpipe/parallel/process_groups.h"
#include "dualpipe/train/train_config.h"
#include "dualpipe/schedule/schedule.h"

namespace dualpipe::train {

// NCCL, or DUALPIPE_NCCL_RULES=1.
bool uses_pipeline_channels(const DeviceChoice& choice);
// Whether the job is more than one pipeline (--dp or --tp above 1): then the process mesh's groups hold it.
bool uses_mesh_groups(const TrainConfig& config);

// Throws InvalidArgument naming the group whose size does not fit the config, before any work.
void check_groups_fit(const TrainConfig& config, const comm::Communicator* world, const parallel::MeshGroups& groups);

// The channels as one communicator, connected to pipeline_peers over `device` before it is returned.
std::shared_ptr<comm::Communicator> connect_pipeline_channels(const parallel::PipelineChannels& channels,
                                                             const Schedule& schedule, c10::Device device,
                                                             std::chrono::milliseconds timeout);

struct JobGroups {
  // The pipeline's communicator for one pipeline over the channels; null for one pipeline without them (the world
  // is the pipeline) and with the mesh's groups (they hold the pipeline).
  std::shared_ptr<comm::Communicator> pipeline;
  parallel::MeshGroups mesh;  // uses_mesh_groups
  std::map<int, parallel::StageCopyGroups> stage_copies;
};

// The groups a stage's layers run their collectives on, from the mesh's (null where the config has none): the MoE
// layers' expert-parallel exchanges (told to `timeline`), the tensor- and the context-parallel groups.
struct LayerGroups {
  std::shared_ptr<parallel::ExpertCommunication> experts;
  std::shared_ptr<ExpertTimeline> timeline;
  models::TensorGroup tp;
  models::ContextGroup cp;
};
LayerGroups make_layer_groups(const TrainConfig& config, const parallel::MeshGroups& groups);

// Made over `world`'s store, every rank of the world calling it at the same time.
JobGroups make_job_groups(const TrainConfig& config, const Schedule& schedule, const DeviceChoice& choice,
                          comm::GlooCommunicator& world);

}  // namespace dualpipe::train
