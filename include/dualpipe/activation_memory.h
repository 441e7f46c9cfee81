// Live activations along a rank's order, in stage units (one stage's activations for one micro-batch), under
// the memory model of the cost model (w_mem, recompute, input_mem). Actions on a rank run one at a time, so the
// count depends on the order only, never on timing.
//
//   without recompute: sFm adds 1 at its end; sBm frees it at its end; sIm keeps w_mem of it until sWm ends;
//   with recompute:    sFm adds input_mem (its stage input); a backward (B, I, or a pair's backward half) first
//                      re-runs the forward, so from its start the full unit is live again; then as above.
//   an overlapped pair adds its forward's share and frees its backward's at its end, so apart from a
//   recomputation it never raises the count in between.
// With w_mem = 1 and no recompute this is spec section 2's integer count.
#pragma once

#include <vector>

#include "dualpipe/action.h"
#include "dualpipe/cost_model.h"
#include "dualpipe/schedule.h"

namespace dualpipe {

class ActivationCounter {
 public:
  explicit ActivationCounter(const CostModel& costs)
      : w_mem_(costs.w_mem), input_mem_(costs.input_mem), recompute_(costs.recompute) {}

  // Runs one action (communication counts nothing); returns the highest level while it ran or right after.
  double apply(const Action& action);
  double level() const { return value(full_, weights_, inputs_); }
  double peak() const { return peak_; }

 private:
  // Counted in whole units, input units and w_mem units so that long schedules add up without rounding drift.
  double value(long full, long weights, long inputs) const {
    return static_cast<double>(full) + static_cast<double>(weights) * w_mem_ + static_cast<double>(inputs) * input_mem_;
  }
  double raise(double level) { return peak_ = level > peak_ ? level : peak_; }
  void backward_starts();  // with recompute the stage input becomes the whole unit again

  double w_mem_;
  double input_mem_;
  bool recompute_;
  long full_ = 0;     // whole stage activations live
  long weights_ = 0;  // I's kept for their W (w_mem each)
  long inputs_ = 0;   // stage inputs kept for a recomputation (input_mem each)
  double peak_ = 0;
};

// The peak per rank under the costs' memory model.
std::vector<double> activation_peaks(const Schedule& schedule, const CostModel& costs);

}  // namespace dualpipe
