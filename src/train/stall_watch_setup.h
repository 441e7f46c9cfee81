// The trainer's stall watch (runtime/stall_watch.h): --stall-report-after and --stall-report-dir, the world's
// peer monitor to share the ranks' states over, and the world ranks of this rank's pipeline to name them by.
#pragma once

#include <memory>

#include "dualpipe/comm/communicator.h"
#include "dualpipe/runtime/stall_watch.h"
#include "dualpipe/train/train_config.h"

namespace dualpipe::train {

// `world`: the job's communicator (every rank of every pipeline); without a peer monitor each rank reports
// only its own state. Throws InvalidArgument naming --stall-report-dir when it cannot be written.
std::unique_ptr<runtime::StallWatch> watch_for_stalls(const TrainConfig& config,
                                                      std::shared_ptr<const runtime::FlightRecorder> recorder,
                                                      comm::Communicator& world);

}  // namespace dualpipe::train
