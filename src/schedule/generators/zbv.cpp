// Zero Bubble V (Qi et al., "Pipeline Parallelism with Controllable Memory", 2024; section 6 of the Zero Bubble
// paper), in the handcrafted order of PyTorch's ScheduleZBVZeroBubble._calculate_single_rank_operations
// (torch/distributed/pipelining/schedules.py).
//
// S = 2R stages in a V: rank r holds stage r (chunk 0, the way down) and stage 2R-1-r (chunk 1, the way back),
// so every micro-batch enters and leaves at rank 0. The backward is split: I (input gradients) stays on the
// critical path, W (weight gradients) fills what would otherwise be bubbles. Rank r runs:
//   warm-up 1: 2(R-r)-1 times F0
//   warm-up 2: r times         F1, F0
//   warm-up 3: R-r times       F1, I1, W1
//   steady:    while chunk 1 has forwards left: F0 (while chunk 0 has any left), I0, W0, F1, I1, W1
//   cool-down: r times I0, I1; then R-r times I0, W(oldest chunk 0); then the remaining W1s, then the W0s.
// With F = I = W every slot of that order lines up with its inputs: no rank ever waits between its first and
// its last action (span == busy on every rank), so the bubble rate (max span - max busy) / max span is zero.
// What remains is the skew of a pipeline's start: rank r starts r forwards after rank 0 and ends r forwards
// after it, so each rank's idle time within the whole makespan is (R-1)F.
//
// Memory: a rank's live activations peak at 2R stage units (the end of warm-up 3's first F1 on every rank:
// 2(R-r)-1 + 2r + 1). A ZBV stage is 1/(2R) of the model, so that is one whole model's worth of activations,
// the same fraction as 1F1B's worst rank (R units of 1/R each): "no higher than 1F1B" means peak <= 2R units.
//
// Minimum M: warm-up 1 alone runs 2R-1 forwards on rank 0, so the order needs M >= 2R-1, and from there on
// it is zero-bubble. PyTorch accepts smaller M by planning 2R-1 micro-batches and dropping the extra ones,
// which leaves bubbles; we reject such M instead, since a ZBV that is not zero-bubble is not what was asked.
#include "generator_util.h"

namespace dualpipe {
namespace {

// A rank's two chunks with their forward / input-backward / weight counters, emitting actions in order.
class ZbvRank {
 public:
  ZbvRank(std::vector<Action>& out, int stage0, int stage1) : out_(out), stage_{stage0, stage1} {}

  void F(int chunk) { out_.push_back(Action::forward(stage_[chunk], forwards_[chunk]++)); }
  void I(int chunk) { out_.push_back(Action::backward_input(stage_[chunk], inputs_[chunk]++)); }
  // The oldest chunk's weight gradients not yet run (PyTorch keeps one W counter per chunk).
  void W(int chunk) { out_.push_back(Action::backward_weight(stage_[chunk], weights_[chunk]++)); }

  int forwards(int chunk) const { return forwards_[chunk]; }
  int inputs(int chunk) const { return inputs_[chunk]; }
  int weights(int chunk) const { return weights_[chunk]; }

 private:
  std::vector<Action>& out_;
  int stage_[2];
  int forwards_[2] = {0, 0};
  int inputs_[2] = {0, 0};
  int weights_[2] = {0, 0};
};

void emit_rank(ZbvRank& rank, int R, int r, int M) {
  for (int i = 0; i < 2 * (R - r) - 1; ++i) rank.F(0);  // warm-up 1: fill the way down
  for (int i = 0; i < r; ++i) {                        // warm-up 2: the way back starts arriving
    rank.F(1);
    rank.F(0);
  }
  for (int i = 0; i < R - r; ++i) {                    // warm-up 3: first backwards at the V's tip side
    rank.F(1);
    rank.I(1);
    rank.W(1);
  }
  while (rank.forwards(1) < rank.forwards(0) || rank.forwards(0) < M) {  // steady: 1 F, 1 I, 1 W per chunk
    if (rank.forwards(0) < M) rank.F(0);
    rank.I(0);
    rank.W(0);
    rank.F(1);
    rank.I(1);
    rank.W(1);
  }
  for (int i = 0; i < r; ++i) {                        // cool-down: input gradients first, weights deferred
    rank.I(0);
    rank.I(1);
  }
  for (int i = 0; i < R - r; ++i) {
    rank.I(0);
    rank.W(0);
  }
  while (rank.weights(1) < rank.inputs(1)) rank.W(1);
  while (rank.weights(0) < rank.inputs(0)) rank.W(0);
}

}  // namespace

Schedule make_zbv(const ScheduleOptions& o) {
  gen::require_basic("ZBV", o);
  gen::require_stages_per_rank("ZBV", o, 2);
  const int R = o.num_ranks, M = o.num_microbatches;
  DUALPIPE_REQUIRE(M >= 2 * R - 1,
                   "ZBV needs M >= 2R-1 micro-batches (rank 0 warms up with 2R-1 forwards), got M=", M,
                   " for R=", R);

  Schedule s = gen::empty_schedule("zbv", R, 2 * R, M, Placement::v_shape(R));
  for (int r = 0; r < R; ++r) {
    ZbvRank rank(s.actions[r], r, 2 * R - 1 - r);
    emit_rank(rank, R, r, M);
    DUALPIPE_CHECK(rank.forwards(0) == M && rank.forwards(1) == M && rank.inputs(0) == M && rank.inputs(1) == M &&
                       rank.weights(0) == M && rank.weights(1) == M,
                   "ZBV order on rank ", r, " does not cover all ", M, " micro-batches");
  }
  return s;
}

}  // namespace dualpipe
