// ZeRO's sharding rule (Rajbhandari et al. 2020, section 3), once for the planner's memory model (layout/) and the
// trainer's prediction of what it holds (state_bytes.h): over n data-parallel ranks, stage 1 keeps 1/n of the
// optimizer state, stage 2 of the gradients too, stage 3 of the parameters too. LibTorch-free, part of the core.
#pragma once

#include "dualpipe/schedule/zero_stage.h"

namespace dualpipe::parallel {

// The share of each model state a rank keeps: 1 or 1/ranks.
struct ZeroShares {
  double parameters = 1, gradients = 1, optimizer = 1;
};

inline ZeroShares zero_shares(ZeroStage zero, int ranks) {
  const double share = 1.0 / ranks;
  ZeroShares s;
  if (shards_optimizer_state(zero)) s.optimizer = share;
  if (shards_gradients(zero)) s.gradients = share;
  if (shards_parameters(zero)) s.parameters = share;
  return s;
}

}  // namespace dualpipe::parallel
