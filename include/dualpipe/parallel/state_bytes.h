// The bytes of model state a rank holds, beside the ZeRO paper's figures for them (Rajbhandari et al. 2020,
// section 3). For each parameter tensor of P bytes that n data-parallel replicas share out (n = 1 where it is not
// shared: an expert only this replica holds, or no replicas):
//   parameters   P, ZeRO-3: P / n
//   gradients    P, ZeRO-2 and 3: P / n  (after the data-parallel reduction)
//   AdamW state  2P (its two moments), ZeRO-1 to 3: 2P / n
// The paper's 2Φ/2Φ/12Φ split is for mixed precision (fp16 weights and gradients; fp32 master weights and moments).
// This trainer keeps fp32 weights and no master copy, so its split is 4Φ/4Φ/8Φ, sharded the same way.
#pragma once

#include <map>

#include "dualpipe/parallel/stage_parameters.h"
#include "dualpipe/schedule/zero_stage.h"

namespace dualpipe::parallel {

class OptimizerSharding;

struct StateBytes {
  double parameters = 0, gradients = 0, optimizer = 0;
};

// The figures of ZeRO stage `zero` for `stages`, shared out as `sharding` deals them (call while the stages'
// parameters are whole).
StateBytes predicted_state_bytes(const Stages& stages, const OptimizerSharding& sharding, ZeroStage zero);
// What `stages` hold now: their parameters' storage, their defined gradients, AdamW's moments.
StateBytes held_state_bytes(const Stages& stages);

}  // namespace dualpipe::parallel
