// What every rank measures in a training step, sent to rank 0 in one gather and combined there into the step's
// report line and metrics record.
#pragma once

#include <torch/types.h>

#include <vector>

#include "dualpipe/models/moe.h"
#include "dualpipe/run/straggler.h"
#include "progress_report.h"
#include "dualpipe/parallel/state_bytes.h"

namespace dualpipe::train {

struct RankStepStats {
  double loss_sum = 0;  // this replica's mean over the replicas of its micro-batches' losses (loss ranks only)
  double step_ms = 0, dp_wait_ms = 0;
  double span_us = 0, busy_us = 0;  // of this rank's compute actions
  // Step 1's check against the single-process reference: what was compared, and the worst gradient cosine.
  double losses_checked = 0, gradients_checked = 0, worst_cosine = 0;
  double peak_activation_bytes = 0, peak_live_activations = 0;
  // Model state held after the step (gradients: after the data-parallel reduction), and the ZeRO paper's figures
  // for it (state_bytes.h).
  parallel::StateBytes held, predicted;
  models::MoeStats moe;  // over every replica's micro-batches
  double all_to_all_ms = 0, all_to_all_exposed_ms = 0;
  run::RankKindTimes kind_ms_per_layer{-1, -1, -1, -1, -1};  // for the straggler watch (run/straggler.h)
};

// One tensor of doubles, the form gather_to_root moves; unpack_step_stats reads it back exactly.
torch::Tensor pack_step_stats(const RankStepStats& stats);
RankStepStats unpack_step_stats(const torch::Tensor& packed);

// The step's report from every rank's stats: losses summed, times and peaks as the slowest or largest rank's,
// the bubble from the longest span and the longest busy time. Fills step, loss, times, bubble, MoE and memory;
// the caller adds lr, grad_norm and tokens_per_s.
StepReport combine_step_stats(int step, const std::vector<RankStepStats>& ranks);

// Step 1's check summed over ranks: losses and gradients compared, and the worst cosine distance.
struct ReferenceCheckTotals {
  int losses = 0, gradients = 0;
  double worst_cosine = 0;
};
ReferenceCheckTotals reference_check_totals(const std::vector<RankStepStats>& ranks);

}  // namespace dualpipe::train
