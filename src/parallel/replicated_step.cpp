#include "dualpipe/parallel/replicated_step.h"

#include "dualpipe/parallel/collective_completion.h"

namespace dualpipe::parallel {

ReplicatedStep::ReplicatedStep(DataParallel& dp, Stages& stages, ZeroStage zero)
    : dp_(&dp), stages_(&stages), zero_(zero) {
  if (shards_optimizer_state(zero)) sharding_ = OptimizerSharding(dp, stages);
  predicted_ = predicted_state_bytes(stages, sharding_, zero);
  if (shards_parameters(zero)) parameters_ = ParameterSharding(sharding_, stages);
}

void ReplicatedStep::bind(runtime::StepArgs& args) {
  if (!dp_) return;
  if (dp_->replicas() > 1) args.reduce_grad = [this](int stage) { return reduce(stage); };
  if (parameters_.on()) {  // each stage's parameters here from one action before its first to its last
    args.unshard = [this](int stage) { parameters_.prefetch(stage); };
    args.wait_unsharded = [this](int stage) { parameters_.wait(stage); };
    args.reshard = [this](int stage) { parameters_.release(stage); };
  }
}

runtime::StartedReduction ReplicatedStep::reduce(int stage) {
  StageParameters& state = stages_->at(stage);
  // A stage with a copy on another pipeline rank needs every holder's gradients for the copies' sum, and c10d's
  // reduce has one root where the owner's replica holds two copies: its bucket is all-reduced even from ZeRO-2 on,
  // and finish_reductions() drops what this replica does not own.
  const StartedCollectives started = shards_gradients(zero_) && !(joins_copies() && dp_->joins_copies_of(stage))
                                         ? sharding_.start_reduction_to_owners(stage, state, dp_->replicas())
                                         : dp_->start(stage, state, joins_copies());
  return {started.bytes, when_completed(started.works)};
}

double ReplicatedStep::finish_reductions() {
  if (!dp_) return 0;
  const double waited = dp_->finish() + sharding_.finish_reductions();
  if (shards_gradients(zero_)) sharding_.keep_own_gradients(*stages_);
  return waited;
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
