#include "state_bytes.h"

#include "optimizer_sharding.h"
#include "stage_state.h"

namespace dualpipe::train {

StateBytes predicted_state_bytes(const std::map<int, StageState>& stages, const OptimizerSharding& sharding,
                                 int zero_stage) {
  StateBytes bytes;
  for (const auto& [s, state] : stages)
    for (const auto& p : state.module->named_parameters()) {
      const double whole = double(p.value().nbytes()), share = whole / sharding.sharing_ranks(s, p.key());
      bytes.parameters += zero_stage >= 3 ? share : whole;
      bytes.gradients += zero_stage >= 2 ? share : whole;
      bytes.optimizer += 2 * (zero_stage >= 1 ? share : whole);
    }
  return bytes;
}

StateBytes held_state_bytes(const std::map<int, StageState>& stages) {
  StateBytes bytes;
  for (const auto& [s, state] : stages) {
    for (const auto& p : state.module->parameters()) {
      bytes.parameters += double(p.nbytes());
      if (p.grad().defined()) bytes.gradients += double(p.grad().nbytes());
    }
    bytes.optimizer += double(state.optimizer_state_bytes());
  }
  return bytes;
}

}  // namespace dualpipe::train
