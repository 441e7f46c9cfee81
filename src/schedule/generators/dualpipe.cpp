// DualPipe and DualPipeV (DeepSeek-V3 technical report; reference implementation deepseek-ai/DualPipe),
// exactly as spec sections 4 and 5 write them.
//
// Each rank holds two stages and feeds two streams of micro-batches: the "near" one enters on its side of
// the pipeline, the "far" one on the other side. DualPipe's streams are its two directions (micro-batches
// 0..M/2-1 enter at rank 0, M/2..M-1 at rank R-1); DualPipeV's are the two phases of the V (every
// micro-batch runs phase 0, stages 0..R-1, then phase 1, stages R..2R-1). Both then follow one eight-step
// recipe in which only the counts differ.
#include <deque>
#include <utility>

#include "generator_util.h"

namespace dualpipe {
namespace {

// One stream of micro-batches through one of the rank's stages.
struct Stream {
  int stage = 0;
  int first_microbatch = 0;
  int next_forward = 0;
  int next_backward = 0;
};

// Emits a rank's actions; keeps the stream counters and the FIFO of deferred weight gradients.
class RankRecipe {
 public:
  RankRecipe(std::vector<Action>& out, Stream near, Stream far) : out_(out), streams_{near, far} {}

  enum Which { kNear = 0, kFar = 1 };

  void F(Which w) { out_.push_back(next_forward(w)); }
  void B(Which w, bool defer_weights) { out_.push_back(next_backward(w, defer_weights)); }
  void W() {
    const auto [stage, microbatch] = deferred_.front();
    deferred_.pop_front();
    out_.push_back(Action::backward_weight(stage, microbatch));
  }
  // An overlapped pair: forward of one stream, full backward of the other.
  void FB(Which forward_stream, Which backward_stream) {
    const Action f = next_forward(forward_stream);
    const Action b = next_backward(backward_stream, false);
    out_.push_back(Action::overlapped(f.stage, f.microbatch, b.stage, b.microbatch));
  }

 private:
  Action next_forward(Which w) {
    Stream& s = streams_[w];
    return Action::forward(s.stage, s.first_microbatch + s.next_forward++);
  }
  Action next_backward(Which w, bool defer_weights) {
    Stream& s = streams_[w];
    const int m = s.first_microbatch + s.next_backward++;
    if (!defer_weights) return Action::backward(s.stage, m);
    deferred_.emplace_back(s.stage, m);
    return Action::backward_input(s.stage, m);
  }

  std::vector<Action>& out_;
  Stream streams_[2];
  std::deque<std::pair<int, int>> deferred_;  // (stage, micro-batch) of each I awaiting its W
};

// The eight steps of spec section 4 for one rank. `half` is R/2 for DualPipe and R for DualPipeV,
// `h` the rank's distance from its pipeline end, `per_stream` the micro-batches each stream carries.
void emit_rank(RankRecipe& rank, int half, int h, int per_stream) {
  using W = RankRecipe::Which;
  const W near = RankRecipe::kNear, far = RankRecipe::kFar;
  const int outer = half - h - 1;  // ranks closer to the ends warm up longer

  for (int i = 0; i < 2 * outer; ++i) rank.F(near);           // 1. near warm-up
  for (int i = 0; i < h + 1; ++i) {                            // 2. both streams start
    rank.F(near);
    rank.F(far);
  }
  for (int i = 0; i < outer; ++i) {                            // 3. far backwards begin, W fills
    rank.B(far, true);
    rank.W();
    rank.F(far);
  }
  const int steady = per_stream - 2 * half + h + 1;
  for (int i = 0; i < steady; ++i) {                           // 4. the overlapped steady state
    if (i == 0 && h == half - 1) {                             //    middle ranks: first pair split
      rank.F(near);
      rank.B(far, false);
    } else {
      rank.FB(near, far);
    }
    rank.FB(far, near);
  }
  for (int i = 0; i < outer; ++i) {                            // 5. near forwards run out
    rank.B(far, false);
    rank.FB(far, near);
  }
  bool defer = false;                                          // 6. drain; zero bubble from the middle on
  for (int i = 0; i < h + 1; ++i) {
    if (i >= (h + 1) / 2 && h % 2 == 1) defer = true;
    rank.B(far, defer);
    if (i >= (h + 1) / 2 && h % 2 == 0) defer = true;
    rank.B(near, defer);
  }
  for (int i = 0; i < outer; ++i) {                            // 7. weights fill the drain
    rank.W();
    rank.B(near, true);
  }
  for (int i = 0; i < h + 1; ++i) rank.W();                    // 8. the last deferred weights
}

}  // namespace

Schedule make_dualpipe(const ScheduleOptions& o) {
  gen::require_basic("DualPipe", o);
  gen::require_stages_per_rank("DualPipe", o, 2);
  const int R = o.num_ranks, M = o.num_microbatches;
  DUALPIPE_REQUIRE(R % 2 == 0, "DualPipe needs an even number of ranks, got R=", R);
  DUALPIPE_REQUIRE(M % 2 == 0, "DualPipe needs an even number of micro-batches (half enter from each end), got M=",
                   M);
  DUALPIPE_REQUIRE(M >= 2 * R, "DualPipe needs M >= 2R micro-batches, got M=", M, " for R=", R);

  std::vector<std::uint8_t> direction(M);
  for (int m = 0; m < M; ++m) direction[m] = m < M / 2 ? 0 : 1;
  Schedule s = gen::empty_schedule("dualpipe", R, R, M, Placement::bidirectional(R, std::move(direction)));
  const int half = R / 2;
  for (int r = 0; r < R; ++r) {
    const Stream down{r, 0}, up{R - 1 - r, M / 2};  // direction 0 runs stage r here, direction 1 stage R-1-r
    const bool near_is_down = r < half;
    RankRecipe recipe(s.actions[r], near_is_down ? down : up, near_is_down ? up : down);
    emit_rank(recipe, half, std::min(r, R - 1 - r), M / 2);
  }
  return s;
}

Schedule make_dualpipev(const ScheduleOptions& o) {
  gen::require_basic("DualPipeV", o);
  gen::require_stages_per_rank("DualPipeV", o, 2);
  const int R = o.num_ranks, M = o.num_microbatches;
  DUALPIPE_REQUIRE(M >= 2 * R, "DualPipeV needs M >= 2R micro-batches, got M=", M, " for R=", R);

  Schedule s = gen::empty_schedule("dualpipev", R, 2 * R, M, Placement::v_shape(R));
  for (int r = 0; r < R; ++r) {
    RankRecipe recipe(s.actions[r], Stream{r, 0}, Stream{2 * R - 1 - r, 0});
    emit_rank(recipe, R, r, M);
  }
  return s;
}

}  // namespace dualpipe
