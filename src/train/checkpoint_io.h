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

// Which shards a rank writes. Without expert parallelism the ranks of data-parallel replica 0 write the stages
// whose first (DualPipe, Chimera) copy they hold. With EP groups of E replicas, each replica holds only its expert
// rank's 1/E of the experts: replicas 0 to E-1 write their stages as their expert rank d holds them. With tensor
// parallelism every rank of a writing replica gathers its stages' whole tensors (StageState::save) and inner rank 0
// writes them. Every rank reads each tensor it needs by name from the shard that holds it, whatever the layout that
// wrote them (checkpoint.h).
struct ShardRole {
  int pipeline_rank = 0;
  int replica = 0;
  int expert_parallel = 1;  // E
  int inner_rank = 0;  // c x T + t (mesh.h): every inner rank holds the same whole tensors; 0 writes them

  bool writes() const { return replica < expert_parallel; }
  int expert_rank() const { return expert_parallel > 1 ? replica % expert_parallel : -1; }
};

// What a checkpoint records besides the stages: whose run it is, and what a resume must agree with.
struct CheckpointOwner {
  std::string run;  // world rank 0's run id (the others' is unused)
  CheckpointIdentity identity;
};

// Collective over `world`, every rank of the job (of every replica). Each rank writes the shards its role gives
// it; world rank 0 writes the manifest last and prunes its run's checkpoints to --keep. Returns the step
// directory. Throws InvalidArgument, before writing anything, when the step's directory belongs to another run.
std::string save_checkpoint(const TrainConfig& config, const RunPlan& plan, int step,
                            const data::ReaderPosition& position, const std::map<int, StageState>& stages,
                            const ShardRole& role, const CheckpointOwner& owner, comm::Communicator& world,
                            std::chrono::milliseconds timeout);

struct Resumed {
  std::string directory;
  CheckpointManifest manifest;
};

// The newest complete checkpoint of --checkpoint-dir loaded into `stages`, or nullopt when there is none.
// Throws InvalidArgument naming the checkpoint when it does not fit this run (check_resumable) or a shard is
// corrupted.
std::optional<Resumed> load_newest_checkpoint(const TrainConfig& config, const CheckpointIdentity& identity,
                                              const ShardRole& role, std::map<int, StageState>& stages,
                                              std::vector<std::string>* skipped);

// Before any rank starts: every parameter each stage of this run loads (as each of its `expert_parallel` expert
// ranks holds it) is found in the checkpoint of `dir` with the whole shape the model needs, looked up as the ranks
// will look it up. Throws InvalidArgument naming the tensor, the stage and the checkpoint. Reads every shard.
void check_checkpoint_loads(const RunPlan& plan, int expert_parallel, const std::string& dir,
                            const CheckpointManifest& manifest);

}  // namespace dualpipe::train
