// Megatron-Core's combined 1F1B: pinned orders worked out by hand from Megatron's rules (and its own docstring for
// PP = 1), the same walk as interleaved 1F1B, pairs whose halves never wait on each other, and the rules it refuses.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/schedule/validate.h"
#include "dualpipe/sim/simulate.h"
#include "test_helpers.h"

namespace dualpipe {
namespace {

using test::options;

std::string order(const Schedule& s) {
  std::string text;
  for (int r = 0; r < s.num_ranks; ++r) text += test::join(s.actions[r]) + "\n";
  return text;
}

// Worked by hand. R=2, v=2, M=4, virtual micro-batches as in Interleaved1F1B.PinnedOrderR2M4V2:
// forward k -> (chunk, mb): 0:(0,0) 1:(0,1) 2:(1,0) 3:(1,1) 4:(0,2) 5:(0,3) 6:(1,2) 7:(1,3); chunk c of rank r is
// stage 2c+r. Warm-up: rank 0 (2-0-1)*2 + (2-1)*2 + 1 = 5, rank 1 0 + 2 + 1 = 3; then (F w+k; B k); then the rest.
TEST(Combined1F1B, PinnedOrderR2M4V2) {
  EXPECT_EQ(order(make_combined_1f1b(options(2, 4, 2))),
            "0F0 0F1 2F0 2F1 0F2 (0F3;2B0) (2F2;2B1) (2F3;0B0) 0B1 2B2 2B3 0B2 0B3\n"
            "1F0 1F1 3F0 (3F1;3B0) (1F2;3B1) (1F3;1B0) (3F2;1B1) (3F3;3B2) 3B3 1B2 1B3\n");
}

// Megatron's combined_1f1b_schedule_for_no_pipelining, as its docstring writes it for 4 micro-batches: the first
// forward alone, then each backward beside the next forward, then the last backward alone.
TEST(Combined1F1B, OneRankIsMegatronsNoPipeliningPath) {
  const Schedule s = make_combined_1f1b(options(1, 4));
  EXPECT_EQ(order(s), "0F0 (0F1;0B0) (0F2;0B1) (0F3;0B2) 0B3\n");
  EXPECT_EQ(s.num_stages, 1);
  EXPECT_EQ(order(make_combined_1f1b(options(1, 1))), "0F0 0B0\n");
}

// Taking each pair apart, every rank runs interleaved 1F1B's forwards in its order and its backwards in its order:
// combined 1F1B changes only where they meet. (M != R: interleaved 1F1B's all-warm-up rule for M == R is an older
// Megatron's, which the combined path never had.)
TEST(Combined1F1B, RunsInterleaved1F1BsForwardsAndBackwardsInTheirOrder) {
  for (int R = 2; R <= 5; ++R) {
    for (int v = 2; v <= 4; ++v) {
      for (int M = 2 * R; M <= 4 * R; M += R) {
        const Schedule combined = make_combined_1f1b(options(R, M, v));
        const Schedule interleaved = make_interleaved_1f1b(options(R, M, v));
        EXPECT_EQ(combined.placement, interleaved.placement);
        for (int r = 0; r < R; ++r) {
          std::vector<Action> forwards[2], backwards[2];
          const auto split = [](const std::vector<Action>& actions, std::vector<Action>& f, std::vector<Action>& b) {
            for (const Action& a : actions) {
              if (a.type == ActionType::Overlapped) f.push_back(a.forward_half()), b.push_back(a.backward_half());
              else (a.type == ActionType::Forward ? f : b).push_back(a);
            }
          };
          split(combined.actions[r], forwards[0], backwards[0]);
          split(interleaved.actions[r], forwards[1], backwards[1]);
          EXPECT_EQ(forwards[0], forwards[1]) << "R=" << R << " v=" << v << " M=" << M << " rank " << r;
          EXPECT_EQ(backwards[0], backwards[1]) << "R=" << R << " v=" << v << " M=" << M << " rank " << r;
        }
      }
    }
  }
}

// The extra warm-up forward is there so that "the forward and backward computations are independent in all 1f1b
// steps": no pair's backward is of the micro-batch its forward produces on the stage after it, and no pair's forward
// needs its backward. The validator (which checks every pair's inputs before the pair) accepts every size.
TEST(Combined1F1B, EveryPairsHalvesAreIndependentAndTheScheduleValidates) {
  int pairs = 0;
  for (int R = 1; R <= 6; ++R) {
    for (int v = R == 1 ? 1 : 2; v <= (R == 1 ? 1 : 4); ++v) {
      for (int M = R; M <= 4 * R; M += R) {
        const Schedule s = make_combined_1f1b(options(R, M, v));
        EXPECT_TRUE(find_problems(s).empty()) << "R=" << R << " v=" << v << " M=" << M << "\n"
                                              << test::join_lines(find_problems(s));
        for (const auto& actions : s.actions) {
          for (const Action& a : actions) {
            if (a.type != ActionType::Overlapped) continue;
            ++pairs;
            EXPECT_FALSE(a.bwd_microbatch == a.microbatch && a.bwd_stage >= a.stage) << to_string(a);
          }
        }
      }
    }
  }
  EXPECT_GT(pairs, 1000);
}

// The warm-up's forwards are held; each pair then frees its backward's before its forward ends (the memory model's
// pair, as DualPipe's), so the peak is the warm-up: interleaved 1F1B's warm-up + 1, which is also interleaved 1F1B's
// own peak (its steady forward is held before its backward frees). Worked from the warm-up formula, M != R.
TEST(Combined1F1B, HoldsItsWarmupWhichIsInterleaved1F1BsPeak) {
  for (int R = 2; R <= 5; ++R) {
    for (int v = 2; v <= 3; ++v) {
      for (int M = 2 * R; M <= 3 * R; M += R) {
        const std::vector<int> combined = peak_activations(make_combined_1f1b(options(R, M, v)));
        const std::vector<int> interleaved = peak_activations(make_interleaved_1f1b(options(R, M, v)));
        for (int r = 0; r < R; ++r) {
          const int warmup = std::min((R - r - 1) * 2 + (v - 1) * R + 1, M * v);
          EXPECT_EQ(combined[r], warmup) << "R=" << R << " v=" << v << " M=" << M << " r=" << r;
          EXPECT_EQ(combined[r], interleaved[r]) << "R=" << R << " v=" << v << " M=" << M << " r=" << r;
        }
      }
    }
  }
}

TEST(Combined1F1B, DefaultIsTwoStagesPerRankAndOneOnOneRank) {
  EXPECT_EQ(make_combined_1f1b(options(4, 8)).placement, Placement::looped(4, 2));
  EXPECT_EQ(make_schedule("Combined-1F1B", options(4, 8)).kind, "combined-1f1b");
  EXPECT_EQ(make_combined_1f1b(options(1, 3)).placement, Placement::looped(1, 1));
}

TEST(Combined1F1B, RejectsWhatMegatronDoesNotRun) {
  test::expect_invalid(&make_combined_1f1b, options(4, 8, 1), "Megatron requires virtual stages for PP > 1");
  test::expect_invalid(&make_combined_1f1b, options(4, 8, 1), "got 1");
  test::expect_invalid(&make_combined_1f1b, options(1, 4, 2), "--stages-per-rank 2 does not apply");
  test::expect_invalid(&make_combined_1f1b, options(4, 6, 2), "multiple of R");
  test::expect_invalid(&make_combined_1f1b, options(4, 6, 2), "M=6 for R=4");
  test::expect_invalid(&make_combined_1f1b, options(0, 8), "at least 1 rank");
}

}  // namespace
}  // namespace dualpipe
