// 1F1B (DAPPLE, Megatron-LM): rank r runs min(R-r-1, M) warm-up forwards, then alternates one forward and
// one full backward until the forwards run out, then drains the remaining backwards.
#include <algorithm>

#include "generator_util.h"

namespace dualpipe {

Schedule make_1f1b(const ScheduleOptions& o) {
  Schedule s = gen::empty_linear_schedule("1F1B", "1f1b", o);
  const int R = o.num_ranks, M = o.num_microbatches;
  for (int r = 0; r < R; ++r) {
    auto& out = s.actions[r];
    int next_forward = 0, next_backward = 0;
    const int warmup = std::min(R - r - 1, M);
    while (next_forward < warmup) out.push_back(Action::forward(r, next_forward++));
    while (next_forward < M) {
      out.push_back(Action::forward(r, next_forward++));
      out.push_back(Action::backward(r, next_backward++));
    }
    while (next_backward < M) out.push_back(Action::backward(r, next_backward++));
  }
  return s;
}

}  // namespace dualpipe
