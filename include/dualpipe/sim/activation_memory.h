// Live activations along a rank's order, in stage units (one stage's activations for one micro-batch), under
// the memory model of the cost model (w_mem, recompute, input_mem). Actions on a rank run one at a time, so the
// count depends on the order only, never on timing.
//
//   without recompute: sFm adds 1 at its end; sBm frees it at its end; sIm keeps w_mem of it until sWm ends;
//   with recompute:    sFm adds input_mem (its stage input); a backward (B, I, or a pair's backward half) first
//                      re-runs the forward, so from its start the full unit is live again; then as above.
//   an overlapped pair adds its forward's share and frees its backward's at its end, so apart from a
//   recomputation it never raises the count in between.
// Every amount is times the stage's activation size (act_scale, 1 by default). With w_mem = 1, no recompute and
// default sizes this is spec section 2's integer count.
#pragma once

#include <vector>

#include "dualpipe/schedule/action.h"
#include "dualpipe/schedule/schedule.h"
#include "dualpipe/sim/cost_model.h"

namespace dualpipe {

class ActivationCounter {
 public:
  // Keeps a pointer to the costs' per-stage activation sizes: the costs must outlive the counter.
  explicit ActivationCounter(const CostModel& costs)
      : w_mem_(costs.w_mem), input_mem_(costs.input_mem), recompute_(costs.recompute),
        sizes_(costs.stage_activation.empty() ? nullptr : &costs.stage_activation) {}

  // Runs one action (communication counts nothing); returns the highest level while it ran or right after.
  double apply(const Action& action);
  double level() const { return full_ + weights_ * w_mem_ + inputs_ * input_mem_; }
  double peak() const { return peak_; }

 private:
  // Whole activations, I's shares kept for W and kept stage inputs, each summed in units of the stages' sizes: with
  // the default sizes (1) these are whole numbers, so long schedules add up without rounding drift.
  double size(int stage) const {
    return sizes_ && stage >= 0 && stage < static_cast<int>(sizes_->size()) ? (*sizes_)[stage] : 1.0;
  }
  void backward_starts(int stage);  // with recompute the stage input becomes the whole activation again

  double w_mem_;
  double input_mem_;
  bool recompute_;
  const std::vector<double>* sizes_;
  double full_ = 0;
  double weights_ = 0;
  double inputs_ = 0;
  double peak_ = 0;
};

// The peak per rank under the costs' memory model.
std::vector<double> activation_peaks(const Schedule& schedule, const CostModel& costs);

}  // namespace dualpipe
