// Data parallelism for the trainer (internal): D replicas of the pipeline, each training on its own slice of the
// global batch, their gradients averaged over the data-parallel group after every step so that every replica
// takes the same optimizer step. With D = 1 every method is a no-op.
//
// The reduction is one all-reduce per stage after the step (a flat buffer of the stage's gradients), after the
// pipeline's own replica reduction (DualPipe, Chimera). Bucketed reduction that overlaps the schedule's last
// weight-gradient work is not built yet (issue 11).
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/torch.h>

#include <map>
#include <memory>

#include "dualpipe/comm/communicator.h"
#include "stage_state.h"

namespace dualpipe::train {

class DataParallel {
 public:
  DataParallel() = default;  // one replica
  // `group`: this rank's data-parallel group (its rank is the replica index); `world`: every rank of the job.
  DataParallel(c10::intrusive_ptr<c10d::ProcessGroup> group, std::shared_ptr<comm::Communicator> world);

  int replicas() const { return group_ ? group_->getSize() : 1; }
  int replica() const { return group_ ? group_->getRank() : 0; }

  // Every gradient of `stages` replaced by its mean over the replicas.
  void average_gradients(std::map<int, StageState>& stages) const;
  // The mean of `value` over the replicas.
  double mean(double value) const;
  // The number of parameter tensors of `stages` compared with replica 0's; throws Error naming the first
  // stage and parameter that is not bit-identical.
  int check_replicas_identical(const std::map<int, StageState>& stages) const;
  // Waits for every rank of the job (rank 0 hosts the rendezvous store: all leave together).
  void world_barrier() const;

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  std::shared_ptr<comm::Communicator> world_;
};

}  // namespace dualpipe::train
