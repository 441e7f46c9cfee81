// Where a training run's stages live and which c10d backend joins its ranks: --device and --backend checked
// against each other and against this machine, before any rank starts (check_config) and again in every rank.
#pragma once

#include <c10/core/Device.h>

#include "dualpipe/comm/backend.h"
#include "dualpipe/train/train_config.h"

namespace dualpipe::train {

struct DeviceChoice {
  bool cuda = false;
  comm::BackendKind backend = comm::BackendKind::gloo;
};

// Throws InvalidArgument naming the option and the rule.
DeviceChoice choose_device(const TrainConfig& config);

// This process's stage device: the CPU, or GPU LOCAL_RANK modulo the GPUs this machine has (ranks share GPUs
// round-robin over Gloo; NCCL needs a GPU of its own for every rank, which choose_device checks against
// LOCAL_WORLD_SIZE).
c10::Device stage_device(const DeviceChoice& choice);

}  // namespace dualpipe::train
