// Interleaved 1F1B (Megatron-LM): pinned orders worked out by hand from Megatron's rules, validity over a grid,
// and the simulator's bubble against the published (R-1)(F+B) for per-stage costs F, B.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/schedule/validate.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/util/error.h"
#include "test_helpers.h"

namespace dualpipe {
namespace {

using test::options;

void expect_interleaved_invalid(const ScheduleOptions& o, const std::string& rule) {
  test::expect_invalid(&make_interleaved_1f1b, o, rule);
}

// The order of R ranks, v stages per rank, M micro-batches is `ranks`, one line of actions per rank.
void expect_interleaved_order(int R, int M, int v, const std::vector<std::string>& ranks) {
  std::string expected;
  for (std::size_t r = 0; r < ranks.size(); ++r) expected += "rank " + std::to_string(r) + ": " + ranks[r] + "\n";
  EXPECT_EQ(format_text(make_interleaved_1f1b(options(R, M, v))), expected);
}

// Worked by hand. R=2, v=2, M=4: 8 virtual micro-batches per rank in groups of R*v = 4.
// Forward k -> (chunk, mb): 0:(0,0) 1:(0,1) 2:(1,0) 3:(1,1) 4:(0,2) 5:(0,3) 6:(1,2) 7:(1,3);
// backward k runs chunk 1-c for the same micro-batch. Chunk c of rank r is stage 2c+r.
// Warm-up: rank 0 (2-0-1)*2 + (2-1)*2 = 4, rank 1 0 + 2 = 2; then F(w+k) B(k); then the remaining B.
TEST(Interleaved1F1B, PinnedOrderR2M4V2) {
  expect_interleaved_order(2, 4, 2, {"0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3",
                                     "1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3"});
}

// Worked by hand. R=3, v=2, M=6: groups of 6 virtual micro-batches; warm-up 7, 5, 3.
TEST(Interleaved1F1B, PinnedOrderR3M6V2) {
  expect_interleaved_order(3, 6, 2,
                           {"0F0 0F1 0F2 3F0 3F1 3F2 0F3 0F4 3B0 0F5 3B1 3F3 3B2 3F4 0B0 3F5 "
                            "0B1 0B2 3B3 3B4 3B5 0B3 0B4 0B5",
                            "1F0 1F1 1F2 4F0 4F1 4F2 4B0 1F3 4B1 1F4 4B2 1F5 1B0 4F3 1B1 4F4 "
                            "1B2 4F5 4B3 4B4 4B5 1B3 1B4 1B5",
                            "2F0 2F1 2F2 5F0 5B0 5F1 5B1 5F2 5B2 2F3 2B0 2F4 2B1 2F5 2B2 5F3 "
                            "5B3 5F4 5B4 5F5 5B5 2B3 2B4 2B5"});
}

// M == R: Megatron's all_warmup_microbatches rule runs every forward first, then every backward.
TEST(Interleaved1F1B, PinnedOrderAllWarmupWhenMEqualsR) {
  expect_interleaved_order(2, 2, 2, {"0F0 0F1 2F0 2F1 2B0 2B1 0B0 0B1", "1F0 1F1 3F0 3F1 3B0 3B1 1B0 1B1"});
}

// v = 1 is plain 1F1B (warm-up R-r-1), which Megatron runs without the interleaved function; any M.
TEST(Interleaved1F1B, OneStagePerRankIsPlain1F1B) {
  expect_interleaved_order(2, 3, 1, {"0F0 0F1 0B0 0F2 0B1 0B2", "1F0 1B0 1F1 1B1 1F2 1B2"});
  for (int R = 1; R <= 5; ++R) {
    for (int M = 1; M <= 7; ++M) {
      ScheduleOptions plain;
      plain.num_ranks = R;
      plain.num_microbatches = M;
      EXPECT_EQ(format_text(make_interleaved_1f1b(options(R, M, 1))), format_text(make_1f1b(plain)))
          << "R=" << R << " M=" << M;
    }
  }
}

TEST(Interleaved1F1B, DefaultIsTwoStagesPerRank) {
  const Schedule s = make_interleaved_1f1b(options(4, 8, 0));
  EXPECT_EQ(s.kind, "interleaved-1f1b");
  EXPECT_EQ(s.num_stages, 8);
  EXPECT_EQ(s.placement, Placement::looped(4, 2));
  EXPECT_EQ(format_text(s), format_text(make_interleaved_1f1b(options(4, 8, 2))));
}

// Valid over a grid, and the simulated bubble is the published (R-1)(F+B) in per-stage costs, for several F, B.
TEST(Interleaved1F1B, ValidAndBubbleMatchesPublishedFigure) {
  for (int R = 1; R <= 6; ++R) {
    for (int v = 1; v <= 4; ++v) {
      for (int M = R; M <= 4 * R; M += R) {
        SCOPED_TRACE(testing::Message() << "R=" << R << " v=" << v << " M=" << M);
        const Schedule s = make_interleaved_1f1b(options(R, M, v));
        EXPECT_EQ(s.num_stages, v * R);
        EXPECT_NO_THROW(validate(s));
        for (const char* spec : {"F=1,B=2", "F=1,B=3", "F=2,B=3", "F=1.5,B=2.5,W=1"}) {
          const CostModel costs = CostModel::parse(spec);
          const Simulation sim = simulate(s, costs);
          EXPECT_DOUBLE_EQ(sim.metrics.bubble, (R - 1) * (costs.forward + costs.backward)) << spec;
          for (const RankMetrics& rm : sim.metrics.per_rank) {
            EXPECT_DOUBLE_EQ(rm.busy, M * v * (costs.forward + costs.backward)) << spec;
            EXPECT_EQ(rm.stages_held, v);
          }
        }
      }
    }
  }
}

// Live activations follow the warm-up: w forwards, then each steady step adds one before it frees one.
TEST(Interleaved1F1B, PeakActivationsFollowWarmup) {
  for (int R = 2; R <= 6; ++R) {
    for (int v = 2; v <= 4; ++v) {
      for (int M = R; M <= 3 * R; M += R) {
        const std::vector<int> peaks = peak_activations(make_interleaved_1f1b(options(R, M, v)));
        for (int r = 0; r < R; ++r) {
          const int warmup = M == R ? M * v : std::min((R - r - 1) * 2 + (v - 1) * R, M * v);
          EXPECT_EQ(peaks[r], std::min(warmup + 1, M * v)) << "R=" << R << " v=" << v << " M=" << M << " r=" << r;
        }
      }
    }
  }
}

TEST(Interleaved1F1B, RejectsWhatItCannotServe) {
  expect_interleaved_invalid(options(4, 6, 2), "multiple of R");
  expect_interleaved_invalid(options(4, 6, 2), "M=6 for R=4");
  expect_interleaved_invalid(options(4, 2, 3), "multiple of R");
  expect_interleaved_invalid(options(4, 8, -1), "stages per rank");
  expect_interleaved_invalid(options(0, 8, 2), "at least 1 rank");
  expect_interleaved_invalid(options(4, 0, 2), "at least 1 micro-batch");
  EXPECT_NO_THROW(make_interleaved_1f1b(options(4, 6, 1)));  // plain 1F1B takes any M
}

}  // namespace
}  // namespace dualpipe
