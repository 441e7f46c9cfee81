// The data-parallel actions of a schedule (UNSHARD, RESHARD, REDUCE_GRAD): the schedule places them, StepArgs says
// what they do (executor.h).
#include "executor_impl.h"

namespace dualpipe::runtime {

void Executor::Impl::on_unshard(const Action& a) {
  if (args->unshard) args->unshard(a.stage);
  unsharding.insert(a.stage);
}

void Executor::Impl::wait_for_parameters(const Action& compute) {
  if (unsharding.empty()) return;
  for (int stage : {compute.stage, compute.type == ActionType::Overlapped ? compute.bwd_stage : compute.stage}) {
    if (!unsharding.erase(stage)) continue;
    if (args->wait_unsharded) args->wait_unsharded(stage);
  }
}

void Executor::Impl::on_reshard(const Action& a) {
  DUALPIPE_CHECK(!unsharding.count(a.stage), "RESHARD of stage ", a.stage, " before any compute action waited for it");
  if (args->reshard) args->reshard(a.stage);
}

void Executor::Impl::on_reduce_grad(const Action& a) {
  if (training && args->reduce_grad) action_reduction = args->reduce_grad(a.stage);
}

}  // namespace dualpipe::runtime
