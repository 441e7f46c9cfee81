#include "step_stats.h"

#include <algorithm>

#include "dualpipe/sim/step_figures.h"

namespace dualpipe::train {
namespace {

// The packed tensor's fields, in this order.
enum Field {
  kLossSum, kStepMs, kSpanUs, kBusyUs, kChecked, kGradsChecked, kWorstCosine, kPeakBytes, kPeakLive, kDpWaitMs,
  kMoeChoices, kMoeDropped, kMoeAuxSum, kMoeAuxCount, kAllToAllMs, kAllToAllExposedMs, kOptimizerStateBytes,
  kGradientBytes, kParameterBytes, kPredictedOptimizerStateBytes, kPredictedGradientBytes, kPredictedParameterBytes,
  kKindMsPerLayer,  // run::kActionKinds fields from here
  kFields = kKindMsPerLayer + run::kActionKinds
};

}  // namespace

torch::Tensor pack_step_stats(const RankStepStats& s) {
  torch::Tensor packed = torch::zeros({kFields}, torch::kDouble);
  double* f = packed.data_ptr<double>();
  f[kLossSum] = s.loss_sum;
  f[kStepMs] = s.step_ms;
  f[kSpanUs] = s.span_us;
  f[kBusyUs] = s.busy_us;
  f[kChecked] = s.losses_checked;
  f[kGradsChecked] = s.gradients_checked;
  f[kWorstCosine] = s.worst_cosine;
  f[kPeakBytes] = s.peak_activation_bytes;
  f[kPeakLive] = s.peak_live_activations;
  f[kDpWaitMs] = s.dp_wait_ms;
  f[kMoeChoices] = double(s.moe.choices);
  f[kMoeDropped] = double(s.moe.dropped);
  f[kMoeAuxSum] = s.moe.aux_loss_sum;
  f[kMoeAuxCount] = double(s.moe.aux_losses);
  f[kAllToAllMs] = s.all_to_all_ms;
  f[kAllToAllExposedMs] = s.all_to_all_exposed_ms;
  f[kOptimizerStateBytes] = s.held.optimizer;
  f[kGradientBytes] = s.held.gradients;
  f[kParameterBytes] = s.held.parameters;
  f[kPredictedOptimizerStateBytes] = s.predicted.optimizer;
  f[kPredictedGradientBytes] = s.predicted.gradients;
  f[kPredictedParameterBytes] = s.predicted.parameters;
  for (int k = 0; k < run::kActionKinds; ++k) f[kKindMsPerLayer + k] = s.kind_ms_per_layer[k];
  return packed;
}

RankStepStats unpack_step_stats(const torch::Tensor& packed) {
  const torch::Tensor contiguous = packed.to(torch::kDouble).contiguous();
  const double* f = contiguous.data_ptr<double>();
  RankStepStats s;
  s.loss_sum = f[kLossSum];
  s.step_ms = f[kStepMs];
  s.span_us = f[kSpanUs];
  s.busy_us = f[kBusyUs];
  s.losses_checked = f[kChecked];
  s.gradients_checked = f[kGradsChecked];
  s.worst_cosine = f[kWorstCosine];
  s.peak_activation_bytes = f[kPeakBytes];
  s.peak_live_activations = f[kPeakLive];
  s.dp_wait_ms = f[kDpWaitMs];
  s.moe = {int64_t(f[kMoeChoices]), int64_t(f[kMoeDropped]), f[kMoeAuxSum], int64_t(f[kMoeAuxCount])};
  s.all_to_all_ms = f[kAllToAllMs];
  s.all_to_all_exposed_ms = f[kAllToAllExposedMs];
  s.held = {f[kParameterBytes], f[kGradientBytes], f[kOptimizerStateBytes]};
  s.predicted = {f[kPredictedParameterBytes], f[kPredictedGradientBytes], f[kPredictedOptimizerStateBytes]};
  for (int k = 0; k < run::kActionKinds; ++k) s.kind_ms_per_layer[k] = f[kKindMsPerLayer + k];
  return s;
}

StepReport combine_step_stats(int step, const std::vector<RankStepStats>& ranks) {
  StepReport r;
  r.step = step;
  double span = 0, busy = 0;
  models::MoeStats moe;
  for (const RankStepStats& g : ranks) {
    r.loss += g.loss_sum;
    r.step_ms = std::max(r.step_ms, g.step_ms);
    r.dp_wait_ms = std::max(r.dp_wait_ms, g.dp_wait_ms);
    r.all_to_all_ms = std::max(r.all_to_all_ms, g.all_to_all_ms);
    r.all_to_all_exposed_ms = std::max(r.all_to_all_exposed_ms, g.all_to_all_exposed_ms);
    span = std::max(span, g.span_us);
    busy = std::max(busy, g.busy_us);
    moe.add(g.moe);
    r.peak_activation_bytes.push_back(g.peak_activation_bytes);
    r.peak_live_activations.push_back(static_cast<int>(g.peak_live_activations));
    r.held_bytes.push_back(g.held);
    r.predicted_bytes.push_back(g.predicted);
  }
  r.bubble = span_bubble_rate(span, busy);
  r.moe_dropped = moe.dropped_fraction();
  r.moe_aux_loss = moe.mean_aux_loss();
  return r;
}

ReferenceCheckTotals reference_check_totals(const std::vector<RankStepStats>& ranks) {
  double losses = 0, gradients = 0, worst = 0;
  for (const RankStepStats& g : ranks) {
    losses += g.losses_checked;
    gradients += g.gradients_checked;
    worst = std::max(worst, g.worst_cosine);
  }
  return {static_cast<int>(losses), static_cast<int>(gradients), worst};
}

}  // namespace dualpipe::train
