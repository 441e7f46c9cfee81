// Zero Bubble ZB-H1 and ZB-H2 (Qi et al. 2024, "Zero Bubble Pipeline Parallelism"), by the rule of spec
// section 6: stage i emits, for x = 0, 1, 2, ..., the triple F_x, I_{x-k(S-1-i)}, W_{x-k(S-1)}, each only
// when its index lies in [0, M). k = 1 gives ZB-H1 (1F1B's memory), k = 2 gives ZB-H2 (more warm-up
// forwards, so the W work can fill the whole drain).
#include "generator_util.h"

namespace dualpipe {
namespace {

Schedule make_zero_bubble(const char* kind, const char* title, int k, const ScheduleOptions& o) {
  gen::require_basic(title, o);
  gen::require_stages_per_rank(title, o, 1);
  const int R = o.num_ranks, S = R, M = o.num_microbatches;
  Schedule s = gen::empty_schedule(kind, R, S, M, Placement::linear(R));
  for (int i = 0; i < S; ++i) {
    auto& out = s.actions[i];
    const int input_lag = k * (S - 1 - i), weight_lag = k * (S - 1);
    for (int x = 0; x < M + weight_lag; ++x) {
      if (x < M) out.push_back(Action::forward(i, x));
      if (x - input_lag >= 0 && x - input_lag < M) out.push_back(Action::backward_input(i, x - input_lag));
      if (x - weight_lag >= 0 && x - weight_lag < M) out.push_back(Action::backward_weight(i, x - weight_lag));
    }
  }
  return s;
}

}  // namespace

Schedule make_zb_h1(const ScheduleOptions& o) { return make_zero_bubble("zb-h1", "ZB-H1", 1, o); }
Schedule make_zb_h2(const ScheduleOptions& o) { return make_zero_bubble("zb-h2", "ZB-H2", 2, o); }

}  // namespace dualpipe
