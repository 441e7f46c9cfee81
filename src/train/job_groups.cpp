#include "job_groups.h"

#include <algorithm>
#include <iostream>
#include <numeric>

#include "dualpipe/comm/directional_communicator.h"
#include "dualpipe/comm/process_group_communicator.h"
#include "dualpipe/util/error.h"

namespace dualpipe::train {

bool uses_pipeline_channels(const DeviceChoice& choice) {
  return choice.backend == comm::BackendKind::nccl || comm::nccl_rules_from_environment();
}

bool uses_mesh_groups(const TrainConfig& config) { return config.parallel.dp > 1 || config.parallel.tp > 1 || config.parallel.cp > 1; }

void check_groups_fit(const TrainConfig& config, const comm::Communicator* world, const parallel::MeshGroups& groups) {
  auto size = [](const c10::intrusive_ptr<c10d::ProcessGroup>& group) { return group ? group->getSize() : 0; };
  DUALPIPE_REQUIRE(size(groups.pipeline) == config.parallel.pp, "the pipeline group has ", size(groups.pipeline),
                   " ranks but --pp is ", config.parallel.pp);
  DUALPIPE_REQUIRE(size(groups.data_parallel) == config.parallel.dp, "the data-parallel group has ", size(groups.data_parallel),
                   " ranks but --dp is ", config.parallel.dp);
  DUALPIPE_REQUIRE(config.parallel.tp == 1 || (size(groups.tensor) == config.parallel.tp && size(groups.tensor_backward) == config.parallel.tp),
                   "the tensor-parallel groups have ", size(groups.tensor), " and ", size(groups.tensor_backward),
                   " ranks but --tp is ", config.parallel.tp);
  DUALPIPE_REQUIRE(config.parallel.cp == 1 || (size(groups.context) == config.parallel.cp && size(groups.context_backward) == config.parallel.cp),
                   "the context-parallel groups have ", size(groups.context), " and ", size(groups.context_backward),
                   " ranks but --cp is ", config.parallel.cp);
  DUALPIPE_REQUIRE(world && world->size() == config.world_size(), "the world has ", world ? world->size() : 0,
                   " ranks but ", config.world_product(), " is ", config.world_size());
  if (config.parallel.ep > 1)
    DUALPIPE_REQUIRE(size(groups.expert) == config.parallel.ep && size(groups.expert_backward) == config.parallel.ep &&
                         size(groups.expert_data_parallel) == config.parallel.dp / config.parallel.ep,
                     "the expert groups have ", size(groups.expert), " and ", size(groups.expert_backward),
                     " ranks and the expert-data-parallel group ", size(groups.expert_data_parallel), ", but --ep ",
                     config.parallel.ep, " of --dp ", config.parallel.dp, " needs ", config.parallel.ep, ", ", config.parallel.ep, " and ",
                     config.parallel.dp / config.parallel.ep);
}

std::shared_ptr<comm::Communicator> connect_pipeline_channels(const parallel::PipelineChannels& channels,
                                                             const Schedule& schedule, c10::Device device,
                                                             std::chrono::milliseconds timeout) {
  const std::vector<int> peers = pipeline_peers(schedule, channels.upward->getRank());
  return comm::connect_directional_channels(channels.upward, channels.downward, peers, device, timeout);
}

LayerGroups make_layer_groups(const TrainConfig& config, const parallel::MeshGroups& groups) {
  LayerGroups layers;
  if (config.parallel.ep > 1) {
    layers.timeline = std::make_shared<ExpertTimeline>();
    layers.experts = std::make_shared<parallel::ExpertCommunication>();
    layers.experts->forward = groups.expert;
    layers.experts->backward = groups.expert_backward;
    layers.experts->on_exchange = [timeline = layers.timeline](const std::string& what, auto start,
                                                               auto waited_from, auto end) {
      timeline->exchange(what, start, waited_from, end);
    };
  }
  if (config.parallel.tp > 1) {
    auto group = std::make_shared<parallel::TensorParallelGroup>();
    group->group = groups.tensor;
    group->backward = groups.tensor_backward;
    group->sequence_parallel = config.parallel.sp;
    layers.tp = std::move(group);
  }
  if (config.parallel.cp > 1) {
    auto group = std::make_shared<parallel::ContextParallelGroup>();
    group->group = groups.context;
    group->backward = groups.context_backward;
    layers.cp = std::move(group);
  }
  return layers;
}

JobGroups make_job_groups(const TrainConfig& config, const Schedule& schedule, const DeviceChoice& choice,
                          comm::GlooCommunicator& world) {
  JobGroups groups;
  const bool channels = uses_pipeline_channels(choice);
  if (!uses_mesh_groups(config) && !channels) return groups;
  parallel::GroupOptions options;
  options.timeout = config.device.timeout();
  options.interface = world.interface();
  options.backend = choice.backend;
  const c10::Device device = stage_device(choice);
  options.cuda_device = device.is_cuda() ? device.index() : 0;
  options.pipeline_channels = channels;
  if (channels && world.rank() == 0)
    std::cout << "dualpipe train: the pipeline's messages on two directional channels over "
              << (choice.backend == comm::BackendKind::nccl ? "NCCL"
                                                            : "Gloo under NCCL's rules (DUALPIPE_NCCL_RULES=1: "
                                                              "every message on tag 0)")
              << std::endl;
  if (!uses_mesh_groups(config)) {
    std::vector<int> ranks(static_cast<std::size_t>(config.parallel.pp));
    std::iota(ranks.begin(), ranks.end(), 0);
    groups.pipeline = connect_pipeline_channels(
        parallel::make_pipeline_channels(world.store(), ranks, world.rank(), options), schedule, device,
        options.timeout);
    return groups;
  }
  const parallel::ProcessMesh mesh({config.parallel.pp, config.parallel.dp, config.parallel.ep, config.parallel.tp, config.parallel.cp});
  groups.mesh = parallel::make_mesh_groups(world.store(), mesh, world.rank(), options);
  std::vector<std::vector<int>> pipeline_ranks_of_stage;
  for (int stage = 0; stage < schedule.num_stages; ++stage)
    pipeline_ranks_of_stage.push_back(schedule.placement.ranks_holding(stage));
  groups.stage_copies =
      parallel::make_stage_copy_groups(world.store(), mesh, world.rank(), pipeline_ranks_of_stage, options);
  return groups;
}

}  // namespace dualpipe::train
