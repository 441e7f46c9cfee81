// ZeRO stage 3 for the trainer (Rajbhandari et al. 2020, FSDP's idea): the parameters are sharded over the
// data-parallel replicas too. Each tensor lives whole on its owner (OptimizerSharding's, which also steps it and
// alone gets its gradient under ZeRO-2's reduction); the other replicas hold it only while their step computes
// with its stage.
//
// As PyTorch's pipelining runs FSDP stages, a stage's parameters are gathered (broadcast from their owners, one
// flat message per owner) before the stage's first action of a step and dropped after its last one (the schedule's
// UNSHARD and RESHARD actions, StepArgs::unshard and reshard); the gather starts one compute action ahead, so that
// it runs while that action computes. The gathered tensors are views of the message buffer, kept out of the
// activation meter (UnmeteredMemory): they are parameters, which state_bytes.h counts after the step.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <map>
#include <memory>
#include <set>
#include <vector>

#include "dualpipe/parallel/optimizer_sharding.h"
#include "dualpipe/parallel/stage_parameters.h"

namespace dualpipe::parallel {

class ParameterSharding {
 public:
  ParameterSharding() = default;  // off: every replica keeps its parameters
  // `stages` must hold whole parameters now; they stay whole until release() or release_all(). The tensors of
  // `stages` are kept: they must not be replaced (their storage is, by set_data).
  ParameterSharding(const OptimizerSharding& owners, Stages& stages);

  bool on() const { return on_; }
  // Starts gathering `stage`'s parameters from their owners (collective over each sharing group; every member
  // calls it for the same stages in the same order). Nothing when they are here or on their way.
  void prefetch(int stage);
  // Finishes the gather prefetch() started (starting it first when it did not): the stage's parameters are whole.
  void wait(int stage);
  // Drops the parameters of `stage` other replicas own.
  void release(int stage);
  void gather_all();
  void release_all();

 private:
  // The tensors of one owner in one group, and the gather of them in flight.
  struct OwnerTensors {
    c10::intrusive_ptr<c10d::ProcessGroup> group;
    int owner = 0;
    bool mine = false;
    std::vector<torch::Tensor> parameters;  // the module's own tensors: set_data changes what they hold
    std::vector<std::vector<int64_t>> shapes;
    torch::Tensor buffer;
    c10::intrusive_ptr<c10d::Work> work;
  };
  bool on_ = false;
  std::shared_ptr<DataParallelTraffic> traffic_;
  std::map<int, std::vector<OwnerTensors>> tensors_;  // by stage
  std::set<int> gathering_, whole_;                   // stages with a gather in flight; stages held whole
};

}  // namespace dualpipe::parallel
