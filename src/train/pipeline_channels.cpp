#include "pipeline_channels.h"

#include <algorithm>
#include <set>

#include "dualpipe/comm/directional_communicator.h"
#include "dualpipe/comm/process_group_communicator.h"

namespace dualpipe::train {

bool uses_pipeline_channels(const DeviceChoice& choice) {
  return choice.backend == comm::BackendKind::nccl || comm::nccl_rules_from_environment();
}

std::vector<int> tensor_peers(const Schedule& schedule, int pipeline_rank) {
  std::set<int> peers;
  for (int stage = 0; stage < schedule.num_stages; ++stage) {
    const std::vector<int> holders = schedule.placement.ranks_holding(stage);
    if (std::find(holders.begin(), holders.end(), pipeline_rank) == holders.end()) continue;
    peers.insert(holders.begin(), holders.end());
    for (int m = 0; m < schedule.num_microbatches; ++m) {
      if (schedule.placement.rank(stage, m) != pipeline_rank) continue;
      if (stage > 0) peers.insert(schedule.placement.rank(stage - 1, m));
      if (stage + 1 < schedule.num_stages) peers.insert(schedule.placement.rank(stage + 1, m));
    }
  }
  peers.erase(pipeline_rank);
  return {peers.begin(), peers.end()};
}

std::shared_ptr<comm::Communicator> connect_pipeline_channels(const parallel::PipelineChannels& channels,
                                                             const Schedule& schedule, c10::Device device,
                                                             std::chrono::milliseconds timeout) {
  comm::ProcessGroupCommunicatorOptions options;
  options.timeout = timeout;
  auto pipeline = std::make_shared<comm::DirectionalCommunicator>(
      std::make_shared<comm::ProcessGroupCommunicator>(channels.upward, options),
      std::make_shared<comm::ProcessGroupCommunicator>(channels.downward, options));
  pipeline->connect(tensor_peers(schedule, pipeline->rank()), at::TensorOptions().device(device));
  return pipeline;
}

}  // namespace dualpipe::train
