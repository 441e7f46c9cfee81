#include "tensor_traffic.h"

#include <cstdio>

namespace dualpipe::train {

TensorParallelTraffic::TensorParallelTraffic(const TrainConfig& c, const RunPlan& plan, int pipeline_rank,
                                             models::TensorGroup tp)
    : tp_(std::move(tp)) {
  if (!tp_ || tp_->size() == 1) return;
  const double share = double(tp_->size() - 1) / tp_->size(), h = double(c.hidden), s = double(c.seq_len);
  const double n = double(c.batch) * s * h * 4;  // bytes of one micro-batch's hidden states
  const Schedule& schedule = plan.schedule;
  for (int stage = 0; stage < schedule.num_stages; ++stage) {
    int microbatches = 0;
    for (int m = 0; m < schedule.num_microbatches; ++m) microbatches += schedule.placement.rank(stage, m) == pipeline_rank;
    if (microbatches == 0) continue;
    const bool first = stage == 0, last = stage == schedule.num_stages - 1;
    const int layers = plan.cut.layers_per_stage[static_cast<size_t>(stage)];
    const int split_parts = c.experts > 0 ? 1 : 2;  // attention, and a dense MLP (MoE layers are not split)
    // Each split part's forward and backward each reduce a micro-batch's hidden states once; the embedding's
    // forward once; the head's backward once, and the cross entropy's forward its max, sum and target logit.
    const double forward = layers * split_parts * 2 * share * n + (first ? 2 * share * n : 0) +
                           (last ? 2 * share * double(c.batch) * s * 3 * 4 : 0);
    const double backward = layers * split_parts * 2 * share * n + (last ? 2 * share * n : 0);
    // Recomputation runs the forward (and the loss) again before the backward.
    predicted_bytes_ += microbatches * (forward * (c.recompute ? 2 : 1) + backward);
    if (c.sp) {
      const double whole_parameters = layers * 6 * h + (first ? s * h : 0) + (last ? 2 * h : 0);
      predicted_bytes_ += 2 * share * whole_parameters * 4;
    }
  }
}

void TensorParallelTraffic::step_started() {
  if (tp_) at_step_start_ = tp_->ring_bytes_sent;
}

void TensorParallelTraffic::step_finished() {
  if (!tp_) return;
  counted_bytes_ += tp_->ring_bytes_sent - at_step_start_;
  ++steps_;
}

std::string TensorParallelTraffic::describe() const {
  if (!tp_ || tp_->size() == 1 || steps_ == 0) return "";
  char line[200];
  std::snprintf(line, sizeof line,
                "tensor-parallel traffic per training step, this rank: %.3f MiB sent (ring), predicted %.3f MiB",
                double(counted_bytes_) / steps_ / (1 << 20), predicted_bytes_ / (1 << 20));
  return line;
}

}  // namespace dualpipe::train
