// The pipeline communicator of a training rank over two directional channels (comm/directional_communicator.h):
// with NCCL, and in NCCL's Gloo test mode (DUALPIPE_NCCL_RULES=1).
#pragma once

#include <c10/core/Device.h>

#include <chrono>
#include <memory>
#include <vector>

#include "device_choice.h"
#include "dualpipe/comm/communicator.h"
#include "dualpipe/parallel/process_groups.h"
#include "dualpipe/schedule/schedule.h"

namespace dualpipe::train {

// NCCL, or DUALPIPE_NCCL_RULES=1.
bool uses_pipeline_channels(const DeviceChoice& choice);

// The pipeline ranks that `pipeline_rank` exchanges stage tensors with: the holders of the stages next to each
// (stage, micro-batch) it holds, and the other holders of its stages (their copies are summed by an exchange).
std::vector<int> tensor_peers(const Schedule& schedule, int pipeline_rank);

// The channels as one communicator, connected to tensor_peers over `device` before it is returned.
std::shared_ptr<comm::Communicator> connect_pipeline_channels(const parallel::PipelineChannels& channels,
                                                             const Schedule& schedule, c10::Device device,
                                                             std::chrono::milliseconds timeout);

}  // namespace dualpipe::train
