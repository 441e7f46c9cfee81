// Where a training run's stages live and which c10d backend joins its ranks: --device and --backend checked
// against each other and against this machine, before any rank starts (check_config) and again in every rank.
#pragma once

#include "dualpipe/comm/backend.h"
#include "dualpipe/train/train_config.h"

namespace dualpipe::train {

struct DeviceChoice {
  bool cuda = false;
  comm::BackendKind backend = comm::BackendKind::gloo;
};

// Throws InvalidArgument naming the option and the rule.
DeviceChoice choose_device(const TrainConfig& config);

}  // namespace dualpipe::train
