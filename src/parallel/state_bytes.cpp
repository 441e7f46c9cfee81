#include "dualpipe/parallel/state_bytes.h"

#include "dualpipe/parallel/optimizer_sharding.h"
#include "dualpipe/parallel/stage_parameters.h"

namespace dualpipe::parallel {

StateBytes predicted_state_bytes(const Stages& stages, const OptimizerSharding& sharding,
                                 int zero_stage) {
  StateBytes bytes;
  for (const auto& [s, state] : stages)
    for (const auto& p : state.parameters) {
      const double whole = double(p.value().nbytes()), share = whole / sharding.sharing_ranks(s, p.key());
      bytes.parameters += zero_stage >= 3 ? share : whole;
      bytes.gradients += zero_stage >= 2 ? share : whole;
      bytes.optimizer += 2 * (zero_stage >= 1 ? share : whole);
    }
  return bytes;
}

StateBytes held_state_bytes(const Stages& stages) {
  StateBytes bytes;
  for (const auto& [s, state] : stages) {
    for (const auto& p : state.parameters.values()) {
      bytes.parameters += double(p.nbytes());
      if (p.grad().defined()) bytes.gradients += double(p.grad().nbytes());
    }
    bytes.optimizer += double(optimizer_state_bytes(state));
  }
  return bytes;
}

}  // namespace dualpipe::parallel
