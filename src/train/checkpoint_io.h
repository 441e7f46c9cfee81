// Saving and loading the sharded checkpoints of checkpoint.h from a running job (internal to the trainer).
#pragma once

#include <chrono>
#include <map>
#include <optional>

#include "dualpipe/comm/communicator.h"
#include "dualpipe/train/checkpoint.h"
#include "dualpipe/train/run_plan.h"
#include "stage_state.h"

namespace dualpipe::train {

// Collective. Every rank writes the stages whose first replica it holds; rank 0 writes the manifest last and
// prunes to --keep. Returns the step directory.
std::string save_checkpoint(const TrainConfig& config, const RunPlan& plan, int step,
                            const data::ReaderPosition& position, const std::map<int, StageState>& stages,
                            comm::Communicator& communicator, std::chrono::milliseconds timeout);

struct Resumed {
  std::string directory;
  CheckpointManifest manifest;
};

// The newest complete checkpoint of --checkpoint-dir loaded into `stages`, or nullopt when there is none.
// Throws InvalidArgument naming the checkpoint when it does not fit this run or a shard is corrupted.
std::optional<Resumed> load_newest_checkpoint(const TrainConfig& config, const RunPlan& plan,
                                              std::map<int, StageState>& stages, std::vector<std::string>* skipped);

}  // namespace dualpipe::train
