// GPipe (Huang et al. 2019): every rank runs all M forwards, then all M full backwards.
#include "generator_util.h"

namespace dualpipe {

Schedule make_gpipe(const ScheduleOptions& o) {
  Schedule s = gen::empty_linear_schedule("GPipe", "gpipe", o);
  const int R = o.num_ranks, M = o.num_microbatches;
  for (int r = 0; r < R; ++r) {
    for (int m = 0; m < M; ++m) s.actions[r].push_back(Action::forward(r, m));
    for (int m = 0; m < M; ++m) s.actions[r].push_back(Action::backward(r, m));
  }
  return s;
}

}  // namespace dualpipe
