#include "dualpipe/parallel/replicated_step.h"

namespace dualpipe::parallel {

ReplicatedStep::ReplicatedStep(DataParallel& dp, Stages& stages, int zero_stage, bool overlap_reduction)
    : dp_(&dp), stages_(&stages), zero_stage_(zero_stage), overlap_reduction_(overlap_reduction) {
  if (zero_stage >= 1) sharding_ = OptimizerSharding(dp, stages);
  predicted_ = predicted_state_bytes(stages, sharding_, zero_stage);
  if (zero_stage >= 3) parameters_ = ParameterSharding(sharding_, stages);
}

void ReplicatedStep::begin(int step, runtime::StepArgs& args) {
  if (!dp_) return;
  // ZeRO-2 reduces onto the owners after the step, once the copies of a stage are summed.
  const bool below_zero2 = zero_stage_ < 2;
  overlap_ = below_zero2 && overlap_reduction_ && dp_->replicas() > 1 && step > 1;
  join_copies_ = below_zero2 && step > 1 && dp_->joins_stage_copies();  // data_parallel.h
  if (overlap_)
    args.reduce_grad = [this](int stage) { dp_->start(stage, stages_->at(stage), /*join_copies=*/true); };
  if (parameters_.on()) {  // each stage's parameters here from one action before its first to its last
    args.unshard = [this](int stage) { parameters_.prefetch(stage); };
    args.wait_unsharded = [this](int stage) { parameters_.wait(stage); };
    args.reshard = [this](int stage) { parameters_.release(stage); };
  }
}

double ReplicatedStep::finish_overlapped() { return overlap_ ? dp_->finish() : 0; }

double ReplicatedStep::reduce_gradients() {
  if (!dp_ || overlap_) return 0;
  return zero_stage_ >= 2 ? sharding_.reduce_gradients_to_owners(*stages_, dp_->replicas())
                          : dp_->average_gradients(*stages_, join_copies_);
}

void ReplicatedStep::update(const std::function<void()>& optimizer_step) {
  sharding_.keep_own_gradients(*stages_);
  optimizer_step();
  if (!parameters_.on()) sharding_.share_updates(*stages_);  // ZeRO-3 gathers them when they are needed
}

void ReplicatedStep::gather_all() {
  parameters_.gather_all();
  sharding_.gather_state(*stages_);
}

void ReplicatedStep::shard_again() {
  sharding_.drop_unowned_state(*stages_);
  parameters_.release_all();
}

}  // namespace dualpipe::parallel
