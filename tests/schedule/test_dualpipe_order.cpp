// DualPipe and DualPipeV exact orders (spec sections 4 and 5).
//
// Two independent references:
//  1. Literal orders derived by hand from the spec's eight steps (derivations in the comments).
//  2. An oracle below that transcribes the step loops of DeepSeek's reference implementation
//     (github.com/deepseek-ai/DualPipe, dualpipe/dualpipe.py DualPipe.step() and dualpipe/dualpipev.py
//     DualPipeV.step()), in the reference's own structure: per-phase chunk counters, the
//     "phase ^= is_in_second_half" flip, WeightGradStore as a FIFO, and the four chunk functions
//     _forward_chunk(phase), _backward_chunk(phase, enable_zb), _weight_chunk(),
//     _forward_backward_chunk(phase0, phase1). Communication calls are left out; only the compute order
//     matters here. The oracle emits our text form and is compared with the generators for whole orders.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/schedule/validate.h"
#include "schedule/dualpipev_r4m8.h"
#include "test_helpers.h"

namespace dualpipe {
namespace {

using test::expect_error_with;

// ------------------------------------------------------------------------------------------------
// The oracle: one rank of the reference DualPipe / DualPipeV step().
// ------------------------------------------------------------------------------------------------
class ReferenceRank {
 public:
  ReferenceRank(bool v_shape, int num_ranks, int rank, int num_chunks)
      : v_shape_(v_shape), num_ranks_(num_ranks), rank_(rank), num_chunks_(num_chunks) {
    is_last_rank_ = rank == num_ranks - 1;
    // DualPipe only: "For the first half of the ranks: phase 0 means forward direction, phase 1 means
    // reverse direction. For the second half of the ranks: phase 0 means reverse direction, phase 1 means
    // forward direction." DualPipeV has no flip.
    is_in_second_half_ = !v_shape && rank >= num_ranks / 2;
    is_middle_rank_ = (rank == num_ranks / 2 - 1) || (rank == num_ranks / 2);
  }

  std::string step() {
    if (v_shape_) {
      dualpipev_step();
    } else {
      dualpipe_step();
    }
    EXPECT_TRUE(weight_grad_store_.empty()) << "assert WeightGradStore.funcs_queue.empty()";
    std::string text;
    for (const std::string& a : out_) text += (text.empty() ? "" : " ") + a;
    return text;
  }

 private:
  // dualpipe/dualpipe.py, DualPipe.step(), the loop part. Its eight loops are DualPipeV's below, counted
  // in folded terms: half_rank = min(rank, R-1-rank) of num_half_ranks = R/2 ranks, with half_num_chunks =
  // M/2 chunks per phase (its step 4 count, half_num_chunks - num_ranks + half_rank + 1, is the same number
  // because num_ranks = 2 * num_half_ranks). The middle ranks split the first main-step pair.
  void dualpipe_step() {
    const int half_rank = std::min(rank_, num_ranks_ - 1 - rank_);
    eight_steps(half_rank, num_ranks_ / 2, num_chunks_ / 2, /*split_first_pair=*/is_middle_rank_);
  }

  // dualpipe/dualpipev.py, DualPipeV.step(), the loop part: the last rank splits the first main-step pair.
  void dualpipev_step() { eight_steps(rank_, num_ranks_, num_chunks_, /*split_first_pair=*/is_last_rank_); }

  // The step loops shared by both step() functions, in DualPipeV.step()'s names.
  void eight_steps(int rank, int num_ranks, int num_chunks, bool split_first_pair) {
    // Step 1: nF0
    const int step_1 = (num_ranks - rank - 1) * 2;
    for (int i = 0; i < step_1; ++i) _forward_chunk(0);

    // Step 2: nF0F1
    const int step_2 = rank + 1;
    for (int i = 0; i < step_2; ++i) {
      _forward_chunk(0);
      _forward_chunk(1);
    }

    // Step 3: nB1W1F1 (Use zero bubble)
    const int step_3 = num_ranks - rank - 1;
    for (int i = 0; i < step_3; ++i) {
      _backward_chunk(1, /*enable_zb=*/true);
      _weight_chunk();
      _forward_chunk(1);
    }

    // Step 4 (Main step): nF0B1F1B0
    const int step_4 = num_chunks - num_ranks * 2 + rank + 1;
    for (int i = 0; i < step_4; ++i) {
      if (i == 0) {
        if (split_first_pair) {
          // "We don't overlap these two chunks to further reduce bubble size."
          _forward_chunk(0);
          _backward_chunk(1);
        } else {
          _forward_backward_chunk(0, 1);
        }
      } else {
        _forward_backward_chunk(0, 1);
      }
      _forward_backward_chunk(1, 0);
    }

    // Step 5: nB1F1B0
    const int step_5 = num_ranks - rank - 1;
    for (int i = 0; i < step_5; ++i) {
      _backward_chunk(1);
      _forward_backward_chunk(1, 0);
    }

    // Step 6: nB1B0 (The second half of the chunks use zero bubble)
    const int step_6 = rank + 1;
    bool enable_zb = false;
    for (int i = 0; i < step_6; ++i) {
      if (i == step_6 / 2 && rank % 2 == 1) enable_zb = true;
      _backward_chunk(1, enable_zb);
      if (i == step_6 / 2 && rank % 2 == 0) enable_zb = true;
      _backward_chunk(0, enable_zb);
    }

    // Step 7: nWB0 (Use zero bubble)
    const int step_7 = num_ranks - rank - 1;
    for (int i = 0; i < step_7; ++i) {
      _weight_chunk();
      _backward_chunk(0, /*enable_zb=*/true);
    }

    // Step 8: nW
    const int step_8 = rank + 1;
    for (int i = 0; i < step_8; ++i) _weight_chunk();
  }

  // ---- the chunk functions (compute parts only) ----

  // _forward_compute_chunk: "phase ^= self.is_in_second_half; chunk_id = self.current_f_chunk_id[phase]".
  void _forward_chunk(int phase) {
    phase ^= is_in_second_half_;
    const int chunk_id = current_f_chunk_id_[phase]++;
    out_.push_back(name(phase, chunk_id, "F"));
  }

  // _backward_compute_chunk: with enable_zb the weight gradients go to WeightGradStore (flush() queues
  // them as one entry) and only the input gradients are computed now.
  void _backward_chunk(int phase, bool enable_zb = false) {
    phase ^= is_in_second_half_;
    const int chunk_id = current_b_chunk_id_[phase]++;
    if (enable_zb) {
      weight_grad_store_.emplace_back(phase, chunk_id);
      out_.push_back(name(phase, chunk_id, "I"));
    } else {
      out_.push_back(name(phase, chunk_id, "B"));
    }
  }

  // _weight_chunk: "WeightGradStore.pop()  # Assume FIFO".
  void _weight_chunk() {
    EXPECT_FALSE(weight_grad_store_.empty());
    if (weight_grad_store_.empty()) return;
    const auto [phase, chunk_id] = weight_grad_store_.front();
    weight_grad_store_.pop_front();
    out_.push_back(name(phase, chunk_id, "W"));
  }

  // _forward_backward_compute_chunk: the forward of phase0 and the full backward of phase1 as one unit
  // (WeightGradStore is not enabled there).
  void _forward_backward_chunk(int phase0, int phase1) {
    phase0 ^= is_in_second_half_;
    const int chunk_id0 = current_f_chunk_id_[phase0]++;
    phase1 ^= is_in_second_half_;
    const int chunk_id1 = current_b_chunk_id_[phase1]++;
    out_.push_back("(" + name(phase0, chunk_id0, "F") + ";" + name(phase1, chunk_id1, "B") + ")");
  }

  // Our notation for (phase after the flip, chunk id).
  //  DualPipe: phase 0 is the forward direction (stage = rank, micro-batches 0..M/2-1 scattered on the
  //  first rank); phase 1 the reverse direction (enters at the last rank, so this rank runs its stage
  //  R-1-rank; micro-batches M/2..M-1).
  //  DualPipeV: phase 0 runs stage rank, phase 1 stage 2R-1-rank; chunk id = micro-batch.
  std::string name(int phase, int chunk_id, const char* type) const {
    int stage, microbatch;
    if (v_shape_) {
      stage = phase == 0 ? rank_ : 2 * num_ranks_ - 1 - rank_;
      microbatch = chunk_id;
    } else {
      stage = phase == 0 ? rank_ : num_ranks_ - 1 - rank_;
      microbatch = phase == 0 ? chunk_id : num_chunks_ / 2 + chunk_id;
    }
    return std::to_string(stage) + type + std::to_string(microbatch);
  }

  bool v_shape_;
  int num_ranks_, rank_, num_chunks_;
  bool is_last_rank_ = false, is_in_second_half_ = false, is_middle_rank_ = false;
  int current_f_chunk_id_[2] = {0, 0};
  int current_b_chunk_id_[2] = {0, 0};
  std::deque<std::pair<int, int>> weight_grad_store_;  // (phase, chunk id) of each deferred backward
  std::vector<std::string> out_;
};

std::string reference_text(bool v_shape, int R, int M) {
  std::string text;
  for (int r = 0; r < R; ++r) {
    text += "rank " + std::to_string(r) + ": " + ReferenceRank(v_shape, R, r, M).step() + "\n";
  }
  return text;
}

void expect_same_orders(const std::string& expected, const Schedule& s) {
  const std::string actual = format_text(s);
  EXPECT_EQ(actual, expected);
  EXPECT_TRUE(find_problems(s).empty()) << test::join_lines(find_problems(s));
}

// ------------------------------------------------------------------------------------------------
// Whole orders against the reference transcription.
// ------------------------------------------------------------------------------------------------

TEST(DualPipeOrder, MatchesReferenceImplementation) {
  const std::pair<int, int> cases[] = {{2, 4}, {4, 8}, {4, 10}, {6, 12}, {8, 16},
                                       // more: longer steady states and the next even sizes
                                       {2, 6}, {6, 14}, {8, 20}};
  for (auto [R, M] : cases) {
    SCOPED_TRACE("DualPipe R=" + std::to_string(R) + " M=" + std::to_string(M));
    expect_same_orders(reference_text(false, R, M), make_dualpipe(ScheduleOptions{R, M}));
  }
}

TEST(DualPipeVOrder, MatchesReferenceImplementation) {
  const std::pair<int, int> cases[] = {{1, 2}, {1, 3}, {2, 4}, {2, 5}, {4, 8}, {4, 9},
                                       // more: odd M and longer steady states
                                       {3, 6}, {3, 7}, {4, 13}, {8, 16}};
  for (auto [R, M] : cases) {
    SCOPED_TRACE("DualPipeV R=" + std::to_string(R) + " M=" + std::to_string(M));
    expect_same_orders(reference_text(true, R, M), make_dualpipev(ScheduleOptions{R, M}));
  }
}

// ------------------------------------------------------------------------------------------------
// Whole orders derived by hand from the spec's steps.
// ------------------------------------------------------------------------------------------------

// R=2, M=4, half=1. Both ranks have h=0 and are the middle ranks (h = half-1), so steps 1, 3, 5, 7 are
// empty, step 4 runs M/2-R+h+1 = 1 time with its first pair split, step 6 runs once and (h even) defers
// from that iteration's B(near), step 8 runs one W.
//  rank 0: near = direction 0 at stage 0 (mb 0,1), far = direction 1 at stage 1 (mb 2,3):
//    2: 0F0 1F2 | 4: 0F1 1B2 (1F3;0B0) | 6: 1B3 0I1 | 8: 0W1
//  rank 1: near = direction 1 at stage 0 (mb 2,3), far = direction 0 at stage 1 (mb 0,1):
//    2: 0F2 1F0 | 4: 0F3 1B0 (1F1;0B2) | 6: 1B1 0I3 | 8: 0W3
constexpr const char* kDualPipeR2M4 =
    "rank 0: 0F0 1F2 0F1 1B2 (1F3;0B0) 1B3 0I1 0W1\n"
    "rank 1: 0F2 1F0 0F3 1B0 (1F1;0B2) 1B1 0I3 0W3\n";

// R=4, M=8, half=2; direction 0 carries mb 0..3 (stage r on rank r), direction 1 mb 4..7 (stage 3-r).
//  rank 0 (h=0, near stage 0, far stage 3): the spec's own example line.
//  rank 1 (h=1, middle; near = dir 0 at stage 1, far = dir 1 at stage 2):
//    2 (x2): 1F0 2F4 1F1 2F5 | 4 (x2, first split): 1F2 2B4 (2F6;1B0) (1F3;2B5) (2F7;1B1)
//    6 (x2, from i=(h+1)/2=1 on, h odd, starting with B(far)): 2B6 1B2 2I7 1I3 | 8: 2W7 1W3
//  rank 2 (h=1, middle; near = dir 1 at stage 1 (mb 4..7), far = dir 0 at stage 2 (mb 0..3)):
//    2: 1F4 2F0 1F5 2F1 | 4: 1F6 2B0 (2F2;1B4) (1F7;2B1) (2F3;1B5) | 6: 2B2 1B6 2I3 1I7 | 8: 2W3 1W7
//  rank 3 (h=0; near = dir 1 at stage 0, far = dir 0 at stage 3):
//    1: 0F4 0F5 | 2: 0F6 3F0 | 3: 3I0 3W0 3F1 | 4: (0F7;3B1) (3F2;0B4) | 5: 3B2 (3F3;0B5)
//    6 (h even: defer from B(near)): 3B3 0I6 | 7: 0W6 0I7 | 8: 0W7
constexpr const char* kDualPipeR4M8 =
    "rank 0: 0F0 0F1 0F2 3F4 3I4 3W4 3F5 (0F3;3B5) (3F6;0B0) 3B6 (3F7;0B1) 3B7 0I2 0W2 0I3 0W3\n"
    "rank 1: 1F0 2F4 1F1 2F5 1F2 2B4 (2F6;1B0) (1F3;2B5) (2F7;1B1) 2B6 1B2 2I7 1I3 2W7 1W3\n"
    "rank 2: 1F4 2F0 1F5 2F1 1F6 2B0 (2F2;1B4) (1F7;2B1) (2F3;1B5) 2B2 1B6 2I3 1I7 2W3 1W7\n"
    "rank 3: 0F4 0F5 0F6 3F0 3I0 3W0 3F1 (0F7;3B1) (3F2;0B4) 3B2 (3F3;0B5) 3B3 0I6 0W6 0I7 0W7\n";

// DualPipeV R=4, M=8: kDualPipeVR4M8, derived in dualpipev_r4m8.h (the CSV test reads it too).

TEST(DualPipeOrder, HandDerivedR2M4) {
  expect_same_orders(kDualPipeR2M4, make_dualpipe(ScheduleOptions{2, 4}));
  EXPECT_EQ(reference_text(false, 2, 4), kDualPipeR2M4) << "the oracle and the hand derivation disagree";
}

TEST(DualPipeOrder, HandDerivedR4M8) {
  expect_same_orders(kDualPipeR4M8, make_dualpipe(ScheduleOptions{4, 8}));
  EXPECT_EQ(reference_text(false, 4, 8), kDualPipeR4M8) << "the oracle and the hand derivation disagree";
}

TEST(DualPipeOrder, SpecExampleRank0) {
  // Spec section 4's example, verbatim.
  const Schedule s = make_dualpipe(ScheduleOptions{4, 8});
  EXPECT_EQ("rank 0: " + test::join(s.actions[0]),
            "rank 0: 0F0 0F1 0F2 3F4 3I4 3W4 3F5 (0F3;3B5) (3F6;0B0) 3B6 (3F7;0B1) 3B7 0I2 0W2 0I3 0W3");
}

TEST(DualPipeVOrder, HandDerivedR4M8) {
  expect_same_orders(test::kDualPipeVR4M8, make_dualpipev(ScheduleOptions{4, 8}));
  EXPECT_EQ(reference_text(true, 4, 8), test::kDualPipeVR4M8) << "the oracle and the hand derivation disagree";
}

// ------------------------------------------------------------------------------------------------
// Shape and rejection rules.
// ------------------------------------------------------------------------------------------------

TEST(DualPipeOrder, PlacementAndCounts) {
  const Schedule s = make_dualpipe(ScheduleOptions{4, 8});
  EXPECT_EQ(s.kind, "dualpipe");
  EXPECT_EQ(s.num_stages, 4);
  EXPECT_EQ(s.placement.num_replicas(), 2);
  for (int m = 0; m < 8; ++m) {
    for (int st = 0; st < 4; ++st) {
      // Direction 0 (mb 0..3): stage s on rank s; direction 1 (mb 4..7): stage s on rank R-1-s.
      EXPECT_EQ(s.placement.rank(st, m), m < 4 ? st : 3 - st);
    }
  }
}

TEST(DualPipeVOrder, PlacementAndCounts) {
  const Schedule s = make_dualpipev(ScheduleOptions{3, 6});
  EXPECT_EQ(s.kind, "dualpipev");
  EXPECT_EQ(s.num_stages, 6);
  const int expected_rank[] = {0, 1, 2, 2, 1, 0};  // rank r holds stages r and 2R-1-r
  for (int st = 0; st < 6; ++st) EXPECT_EQ(s.placement.rank(st, 0), expected_rank[st]);
}

TEST(DualPipeOrder, RejectionsNameTheRule) {
  expect_error_with([] { make_dualpipe(ScheduleOptions{5, 20}); }, {"even number of ranks", "5"});
  expect_error_with([] { make_dualpipe(ScheduleOptions{4, 9}); }, {"even number of micro-batches", "9"});
  expect_error_with([] { make_dualpipe(ScheduleOptions{4, 6}); }, {"M >= 2R", "M=6", "R=4"});

  // Through the registry too (what the CLI calls).
  EXPECT_THROW(make_schedule("dualpipe", ScheduleOptions{3, 12}), InvalidArgument);
}

TEST(DualPipeVOrder, RejectionsNameTheRule) {
  expect_error_with([] { make_dualpipev(ScheduleOptions{4, 7}); }, {"M >= 2R", "M=7", "R=4"});
  EXPECT_THROW(make_schedule("dualpipev", ScheduleOptions{1, 1}), InvalidArgument);
  // DualPipeV has no evenness rule: odd R and odd M are served.
  EXPECT_NO_THROW(make_dualpipev(ScheduleOptions{3, 7}));
}

TEST(DualPipeOrder, StagesPerRankOptionIsChecked) {
  ScheduleOptions o{4, 8};
  o.stages_per_rank = 2;  // DualPipe holds two stages per rank: accepted
  EXPECT_NO_THROW(make_dualpipe(o));
  o.stages_per_rank = 3;
  EXPECT_THROW(make_dualpipe(o), InvalidArgument);
  EXPECT_THROW(make_dualpipev(o), InvalidArgument);
}

}  // namespace
}  // namespace dualpipe
