#include "dualpipe/train/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "dualpipe/util/error.h"

namespace dualpipe::train {

void LrSchedule::check() const {
  DUALPIPE_REQUIRE(std::isfinite(lr) && lr > 0 && lr <= 10, "--lr must be in (0, 10], got ", lr);
  DUALPIPE_REQUIRE(std::isfinite(min_lr) && min_lr >= 0 && min_lr <= lr, "--min-lr must be between 0 and --lr ",
                   lr, ", got ", min_lr);
  DUALPIPE_REQUIRE(steps >= 1, "--steps must be at least 1, got ", steps);
  DUALPIPE_REQUIRE(warmup >= 0, "--warmup must be 0 or more steps, got ", warmup);
}

double LrSchedule::at(int step) const {
  if (step <= warmup) return lr * step / (warmup + 1);
  if (steps <= warmup + 1) return lr;
  // Past the last step (a resumed run with more --steps than planned) the rate stays at min_lr.
  const double progress = std::min(1.0, static_cast<double>(step - warmup - 1) / (steps - warmup - 1));
  return min_lr + 0.5 * (lr - min_lr) * (1 + std::cos(M_PI * progress));
}

}  // namespace dualpipe::train
