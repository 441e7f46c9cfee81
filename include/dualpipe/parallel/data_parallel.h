// Data parallelism for the trainer: D replicas of the pipeline, each training on its own slice of the
// global batch, their gradients averaged over the data-parallel group after every step so that every replica
// takes the same optimizer step. With D = 1 every method is a no-op.
//
// With expert parallelism (EP groups of E among the D replicas), an expert's gradient already holds the
// contributions of its EP group's E replicas (the all-to-all brought their tokens), and the other D/E groups hold
// the same expert: it is summed over that expert-data-parallel group and divided by D like the others.
//
// One bucket per stage (two with experts): a flat copy of the stage's gradients, all-reduced asynchronously. The
// executor starts a stage's bucket at the schedule's REDUCE_GRAD action (StepArgs::reduce_grad, through
// ReplicatedStep): right after the step's last action that adds to its gradients, so the reduction runs while the
// schedule goes on, or at the step's end (--no-dp-overlap). finish() then waits for what is left.
//
// A stage with copies on two pipeline ranks (DualPipe, Chimera) can join its copies' sum to the same bucket: the
// all-reduce then runs over every holder of the stage in every replica (StageCopyGroups), and the
// runtime's point-to-point exchange between the copies (Executor::reduce_replica_gradients) is not needed.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/torch.h>

#include <map>
#include <memory>

#include "dualpipe/parallel/data_parallel_traffic.h"
#include "dualpipe/comm/communicator.h"
#include "dualpipe/parallel/process_groups.h"
#include "dualpipe/parallel/stage_parameters.h"

namespace dualpipe::parallel {

// What a stage's reduction started: the bytes of gradients it reduces, and the c10d works that carry them.
struct StartedCollectives {
  int64_t bytes = 0;
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  StartedCollectives& operator+=(const StartedCollectives& other) {
    bytes += other.bytes;
    works.insert(works.end(), other.works.begin(), other.works.end());
    return *this;
  }
};

class DataParallel {
 public:
  DataParallel() = default;  // one replica
  // `group`: this rank's data-parallel group (its rank is the replica index); `world`: every rank of the job;
  // `expert_group`: the EP group, `expert_data_parallel`: the ranks holding the same experts (null: no experts
  // are sharded).
  DataParallel(c10::intrusive_ptr<c10d::ProcessGroup> group, std::shared_ptr<comm::Communicator> world,
               c10::intrusive_ptr<c10d::ProcessGroup> expert_group = {},
               c10::intrusive_ptr<c10d::ProcessGroup> expert_data_parallel = {});
  // Sets the groups that join each stage's copies to its buckets (keyed by stage; see the top of this file).
  void set_stage_copy_groups(std::map<int, StageCopyGroups> groups) { copy_groups_ = std::move(groups); }
  // Whether stage copies' groups were set: then buckets started with join_copies sum the copies too.
  bool joins_stage_copies() const { return !copy_groups_.empty(); }
  // Whether `stage` has a copy on another pipeline rank that its buckets join.
  bool joins_copies_of(int stage) const { return copy_groups_.count(stage) > 0; }

  int replicas() const { return group_ ? group_->getSize() : 1; }
  int replica() const { return group_ ? group_->getRank() : 0; }

  // Starts averaging stage `stage`'s gradients over the replicas, summing its copies too when `join_copies`.
  StartedCollectives start(int stage, StageParameters& state, bool join_copies);
  // Waits for every started bucket and writes the means back into the gradients; returns the milliseconds it
  // waited (the reduction time the step could not hide).
  double finish();
  // The mean of `value` over the replicas.
  double mean(double value) const;
  // `values` (doubles on the CPU) replaced by their sums over the replicas.
  void sum(torch::Tensor& values) const;
  // The sum of `value` over the EP group (for the squares of the expert gradients in the global norm).
  double sum_over_expert_group(double value) const;
  // `values` replaced by their sums over the expert-data-parallel group (unchanged without one).
  void sum_over_expert_data_parallel(torch::Tensor& values) const;
  // The number of parameter tensors of `stages` compared with replica 0's (an expert's with the first holder of
  // the same expert); throws Error naming the first stage and parameter that is not bit-identical.
  int check_replicas_identical(const Stages& stages) const;
  // Whether a parameter split as `split` has its gradient averaged over the expert-data-parallel group (a sharded
  // expert's) rather than the data-parallel group, and that group (null with one replica).
  bool is_sharded_expert(ParameterSplit split) const;
  const c10::intrusive_ptr<c10d::ProcessGroup>& gradient_group(ParameterSplit split) const {
    return is_sharded_expert(split) ? expert_data_parallel_ : group_;
  }
  // What this rank's gradient and parameter collectives sent (shared with the ZeRO sharding built from this).
  const std::shared_ptr<DataParallelTraffic>& traffic() const { return traffic_; }
  // Waits for every rank of the job (rank 0 hosts the rendezvous store: all leave together).
  void world_barrier() const;
  // Every rank of the job (given with more than one replica, or whenever the job is more than one pipeline).
  comm::Communicator& world() const { return *world_; }
  bool has_world() const { return world_ != nullptr; }

 private:
  struct Bucket {
    std::vector<torch::Tensor> gradients;
    std::vector<torch::Tensor> flat;  // one tensor, as c10d wants a list
    c10::intrusive_ptr<c10d::Work> work;  // null: nothing to sum (every holder of the experts is in one EP group)
  };
  StartedCollectives start_bucket(std::vector<torch::Tensor> gradients,
                                  const c10::intrusive_ptr<c10d::ProcessGroup>& group);
  c10::intrusive_ptr<c10d::ProcessGroup> group_, expert_group_, expert_data_parallel_;
  std::map<int, StageCopyGroups> copy_groups_;
  std::shared_ptr<comm::Communicator> world_;
  std::vector<Bucket> buckets_;  // started, not finished
  std::shared_ptr<DataParallelTraffic> traffic_ = std::make_shared<DataParallelTraffic>();
};

}  // namespace dualpipe::parallel
