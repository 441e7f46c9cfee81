#include "dualpipe/parallel/state_bytes.h"

#include "dualpipe/parallel/optimizer_sharding.h"
#include "dualpipe/parallel/stage_parameters.h"
#include "dualpipe/parallel/zero_shares.h"

namespace dualpipe::parallel {

StateBytes predicted_state_bytes(const Stages& stages, const OptimizerSharding& sharding, ZeroStage zero) {
  StateBytes bytes;
  for (const auto& [s, state] : stages)
    for (const auto& p : state.parameters) {
      const double whole = double(p.value().nbytes());
      const ZeroShares kept = zero_shares(zero, sharding.sharing_ranks(s, p.key()));
      bytes.parameters += whole * kept.parameters;
      bytes.gradients += whole * kept.gradients;
      bytes.optimizer += 2 * whole * kept.optimizer;  // AdamW's two moments
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
