// ZeRO stages 1 and 2 for the trainer (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training
// Trillion Parameter Models", 2020): the AdamW state is sharded over the data-parallel replicas instead of kept whole
// by each, and with stage 2 the gradients too: start_reduction_to_owners replaces the all-reduce, each tensor's
// gradients summed onto its owner alone (a reduce) and dropped by the others.
//
// Once the gradients are averaged (every replica holds the same), each replica keeps the gradients of the parameter
// tensors it owns and drops the others, so the optimizer's step updates its shard only (AdamW makes and keeps state
// only for a parameter it steps). Then every owner broadcasts its updated tensors to the other replicas. A tensor's
// update is the same arithmetic on the same operands whichever replica runs it, so training is bit-identical to the
// unsharded run.
//
// Ownership: the tensors of each stage are dealt, largest first, to the least-loaded member of the group that
// averages their gradients (the data-parallel group; for sharded experts the expert-data-parallel group), the same
// on every member. Checkpoints hold the whole state, as without sharding: gather_state() gives every replica the
// whole state before a save, and drop_unowned_state() returns to the shard after a save or a load.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "dualpipe/parallel/data_parallel.h"
#include "dualpipe/parallel/stage_parameters.h"

namespace dualpipe::parallel {

class OptimizerSharding {
 public:
  OptimizerSharding() = default;  // off: every replica keeps the whole state
  OptimizerSharding(const DataParallel& dp, const Stages& stages);

  // Drops the gradients of the tensors other replicas own (call after clipping, before the optimizer's step).
  void keep_own_gradients(Stages& stages) const;
  // ZeRO-2 and 3, in place of DataParallel's all-reduce (a REDUCE_GRAD action): starts summing each of `stage`'s
  // tensors onto its owner, one reduce per owner; a gradient nobody shares (an expert only this replica holds) is
  // divided by `replicas` at once, as DataParallel does.
  StartedCollectives start_reduction_to_owners(int stage, StageParameters& state, int replicas);
  // Waits for the started reductions: each owner gets the mean over the replicas of its tensors' gradients, the
  // others drop theirs. Returns the milliseconds it waited.
  double finish_reductions();
  // Whether this replica owns `name` of `stage` (true where it is not shared out).
  bool owns(int stage, const std::string& name) const;
  // The members of the group that shares out `name` of `stage` (the data-parallel or the expert-data-parallel
  // group), one of which owns it; 1 where it is not sharded.
  int sharing_ranks(int stage, const std::string& name) const;
  bool is_sharded(int stage, const std::string& name) const { return sharing_ranks(stage, name) > 1; }
  // Gives every replica the tensors their owners updated (after the optimizer's step).
  void share_updates(Stages& stages) const;
  // Gives every replica the whole optimizer state, for a checkpoint (collective over the data-parallel replicas).
  void gather_state(Stages& stages) const;
  // Drops the state of the tensors other replicas own.
  void drop_unowned_state(Stages& stages) const;

  // One stage's tensors averaged over one group, by owner (the owner's rank in the group).
  struct Shard {
    c10::intrusive_ptr<c10d::ProcessGroup> group;
    std::vector<std::vector<std::string>> names_by_owner;
  };
  // By stage; a stage none of whose tensors is shared out has none.
  const std::map<int, std::vector<Shard>>& shards() const { return shards_; }
  // The data-parallel group's counter of sent bytes (null when off), which the reductions and broadcasts add to.
  const std::shared_ptr<DataParallelTraffic>& traffic() const { return traffic_; }

 private:
  std::map<int, std::vector<Shard>> shards_;  // by stage
  std::map<int, std::map<std::string, int>> sharing_ranks_;  // by stage and name: the sharded tensors' group sizes
  std::map<int, std::set<std::string>> owned_elsewhere_;     // by stage: the names another replica owns
  std::shared_ptr<DataParallelTraffic> traffic_;
  struct Reduction {  // one owner's tensors of one stage, flat, on their way
    std::vector<torch::Tensor> parameters;
    torch::Tensor flat;
    bool mine = false;
    int replicas = 1;
    c10::intrusive_ptr<c10d::Work> work;
  };
  std::vector<Reduction> pending_;  // started, not finished
};

}  // namespace dualpipe::parallel
