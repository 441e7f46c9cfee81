// Chimera: pinned orders and timelines worked out by hand from the rule in chimera.cpp (two 1F1B streams per
// rank, one per direction; a free rank starts the head that can start first, ties to the smaller slot 2i+s for
// F / 2i+2D-1-s for B, then down), the paper's bubble where its formula applies, bubbles that do not grow with
// the number of units, validity over a grid, and the paper's activation-memory range.
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

void expect_chimera_invalid(const ScheduleOptions& o, const std::string& rule) {
  test::expect_invalid(&make_chimera, o, rule);
}

double bubble(int R, int M, const char* costs) {
  return simulate(make_chimera(options(R, M)), CostModel::parse(costs)).metrics.bubble;
}

std::vector<double> starts(const Simulation& sim, int rank) {
  std::vector<double> out;
  for (const ActionTime& t : sim.timeline[rank]) out.push_back(t.start);
  return out;
}

// Worked by hand. R=4, M=4: micro-batches 0,1 go down (stage s on rank s), 2,3 go up (stage s on rank 3-s);
// i = index within the direction (0,1 both ways). Two micro-batches per direction, so the streams are plain
// 1F1B: stages 0-2 "F F B B", stage 3 "F B F B". Slots (F: 2i+s, B: 2i+7-s), rank by rank (down | up):
//   rank 0: 0F0:0 0F1:2 0B0:7 0B1:9 | 3F2:3 3B2:4 3F3:5 3B3:6
//   rank 1: 1F0:1 1F1:3 1B0:6 1B1:8 | 2F2:2 2F3:4 2B2:5 2B3:7
//   rank 2: 2F0:2 2F1:4 2B0:5 2B1:7 | 1F2:1 1F3:3 1B2:6 1B3:8
//   rank 3: 3F0:3 3B0:4 3F1:5 3B1:6 | 0F2:0 0F3:2 0B2:7 0B3:9
// The run with F=1, B=2 (start times; "r1@2: 2F2 < 1F1" marks where both heads were ready and the slot chose):
//   t=0 r0 0F0, r3 0F2 | t=1 r0 0F1, r1 1F0, r2 1F2, r3 0F3 | t=2 r1@2: 2F2 (slot 2) < 1F1 (3), r2@2: 2F0 (2)
//   < 1F3 (3); r0, r3 wait | t=3 r0 3F2, r1 1F1, r2 1F3, r3 3F0 | t=4 r0 3B2, r1 2F3, r2 2F1, r3 3B0 |
//   t=6 r0 3F3, r1 2B2, r2 2B0, r3 3F1 | t=7 r0 3B3, r3 3B1 | t=8 r1 1B0, r2 1B2 | t=10 r0 0B0, r1 2B3,
//   r2 2B1, r3 0B2 | t=12 r1 1B1, r2 1B3 | t=14 r0 0B1, r3 0B3, ending at 16.
// The paper's figure (F = B, one slot each) has exactly these orders: sorting each rank by slot gives them.
const char* const kR4M4 =
    "rank 0: 0F0 0F1 3F2 3B2 3F3 3B3 0B0 0B1\n"
    "rank 1: 1F0 2F2 1F1 2F3 2B2 1B0 2B3 1B1\n"
    "rank 2: 1F2 2F0 1F3 2F1 2B0 1B2 2B1 1B3\n"
    "rank 3: 0F2 0F3 3F0 3B0 3F1 3B1 0B2 0B3\n";

TEST(Chimera, PinnedOrderR4M4) { EXPECT_EQ(format_text(make_chimera(options(4, 4))), kR4M4); }

// The timeline above, replayed by the simulator: every rank is busy 4 x F + 4 x B = 12, the last backwards
// end at 16, so the bubble is 4. (No order does better at F=1, B=2: an exhaustive search over all schedules
// of these 32 actions, outside this suite, finds none ending at 15. The paper's D-2 = 2 slots assume F = B;
// see PaperBubbleWhenForwardEqualsBackward.)
TEST(Chimera, BasicUnitTimelineR4) {
  const Simulation sim = simulate(make_chimera(options(4, 4)), CostModel{});
  EXPECT_DOUBLE_EQ(sim.metrics.makespan, 16);
  EXPECT_DOUBLE_EQ(sim.metrics.bubble, 4);
  EXPECT_EQ(starts(sim, 0), (std::vector<double>{0, 1, 3, 4, 6, 7, 10, 14}));
  EXPECT_EQ(starts(sim, 1), (std::vector<double>{1, 2, 3, 4, 6, 8, 10, 12}));
  EXPECT_EQ(starts(sim, 2), (std::vector<double>{1, 2, 3, 4, 6, 8, 10, 12}));
  EXPECT_EQ(starts(sim, 3), (std::vector<double>{0, 1, 3, 4, 6, 7, 10, 14}));
  // An independent reference: 1F1B on the same ranks and micro-batches idles (R-1)(F+B) = 9.
  EXPECT_DOUBLE_EQ(simulate(make_1f1b(options(4, 4)), CostModel{}).metrics.bubble, 9);
}

// Worked by hand. R=4, M=8 (two units): down i=0..3 are micro-batches 0,1,4,5, up i=0..3 are 2,3,6,7.
// Four per direction, so the trim binds: warm-ups min(4, 4-s-[s<2]) = 3,2,2,1 forwards at stages 0..3:
//   stage 0: F0 F1 F2 B0 F3 B1 B2 B3     stages 1, 2: F0 F1 B0 F2 B1 F3 B2 B3     stage 3: F0 B0 F1 B1 F2 B2 F3 B3
// (direction-local indices). Slots: F 2i+s, B 2i+7-s. The run with F=1, B=2, start times per rank:
//   rank 0: 0F0@0 0F1@1 0F4@2 3F2@3 3B2@4 3F3@6 3B3@7 0B0@10 0F5@12 3F6@13 3B6@14 0B1@16 3F7@18 3B7@19 0B4@22
//           0B5@26
//   rank 1: 1F0@1 2F2@2 1F1@3 2F3@4 2B2@6 1B0@8 1F4@10 2F6@11 2B3@12 1B1@14 1F5@16 2F7@17 2B6@18 1B4@20 2B7@22
//           1B5@24
//   rank 2: 1F2@1 2F0@2 1F3@3 2F1@4 2B0@6 1B2@8 1F6@10 2F4@11 2B1@12 1B3@14 1F7@16 2F5@17 2B4@18 1B6@20 2B5@22
//           1B7@24
//   rank 3: 0F2@0 0F3@1 0F6@2 3F0@3 3B0@4 3F1@6 3B1@7 0B2@10 0F7@12 3F4@13 3B4@14 0B3@16 3F5@18 3B5@19 0B6@22
//           0B7@26
// Both heads were ready only at r1@2 (2F2 slot 2 < 1F1 slot 3), r2@2 (2F0 2 < 1F3 3), r0@12 (0F5 6 < 3F6 7)
// and r3@12 (0F7 6 < 3F4 7); every other start is the only head whose inputs are done. E.g. r0@2: 3F2 waits
// for 2F2 (ends 3), so the stream's third forward 0F4 goes; r1@10: 1F4 (0F4 ended 3), 2F6 waits for 1F6.
// The second unit's forwards fill the first unit's drain: makespan 28 = 24 busy + 4, the basic unit's bubble.
const char* const kR4M8 =
    "rank 0: 0F0 0F1 0F4 3F2 3B2 3F3 3B3 0B0 0F5 3F6 3B6 0B1 3F7 3B7 0B4 0B5\n"
    "rank 1: 1F0 2F2 1F1 2F3 2B2 1B0 1F4 2F6 2B3 1B1 1F5 2F7 2B6 1B4 2B7 1B5\n"
    "rank 2: 1F2 2F0 1F3 2F1 2B0 1B2 1F6 2F4 2B1 1B3 1F7 2F5 2B4 1B6 2B5 1B7\n"
    "rank 3: 0F2 0F3 0F6 3F0 3B0 3F1 3B1 0B2 0F7 3F4 3B4 0B3 3F5 3B5 0B6 0B7\n";

TEST(Chimera, PinnedOrderR4M8TwoUnits) {
  const Schedule s = make_chimera(options(4, 8));
  EXPECT_EQ(format_text(s), kR4M8);
  const Simulation sim = simulate(s, CostModel{});
  EXPECT_DOUBLE_EQ(sim.metrics.makespan, 28);
  EXPECT_DOUBLE_EQ(sim.metrics.bubble, 4);
  EXPECT_EQ(starts(sim, 0), (std::vector<double>{0, 1, 2, 3, 4, 6, 7, 10, 12, 13, 14, 16, 18, 19, 22, 26}));
  EXPECT_EQ(starts(sim, 1), (std::vector<double>{1, 2, 3, 4, 6, 8, 10, 11, 12, 14, 16, 17, 18, 20, 22, 24}));
  EXPECT_EQ(starts(sim, 2), (std::vector<double>{1, 2, 3, 4, 6, 8, 10, 11, 12, 14, 16, 17, 18, 20, 22, 24}));
  EXPECT_EQ(starts(sim, 3), (std::vector<double>{0, 1, 2, 3, 4, 6, 7, 10, 12, 13, 14, 16, 18, 19, 22, 26}));
  // Every rank holds at most D = 4 activations (rank 0 after 0F0 0F1 0F4 3F2).
  EXPECT_EQ(peak_activations(s), (std::vector<int>{4, 4, 4, 4}));
}

// Worked by hand. R=2: one micro-batch each way per unit; down i=0,1 are micro-batches 0,2, up i=0,1 are 1,3.
// Warm-up 1 at both stages, so every stream is F B F B. Slots: F 2i+s, B 2i+3-s. The run with F=1, B=2:
//   t=0 r0 0F0, r1 0F1 | t=1 r0 1F1, r1 1F0 | t=2 r0 1B1, r1 1B0 | t=4 r0 0B0, r1 0B1 (the other heads,
//   1F3 / 1F2, wait for 0F3 / 0F2) | t=6 r0 0F2, r1 0F3 | t=7 r0 1F3, r1 1F2 | t=8 r0 1B3, r1 1B2 |
//   t=10 r0 0B2, r1 0B3, ending at 12 = 4 x (F+B): no bubble.
TEST(Chimera, PinnedOrderR2M4TwoUnits) {
  EXPECT_EQ(format_text(make_chimera(options(2, 4))),
            "rank 0: 0F0 1F1 1B1 0B0 0F2 1F3 1B3 0B2\n"
            "rank 1: 0F1 1F0 1B0 0B1 0F3 1F2 1B2 0B3\n");
}

// The paper counts bubbles in slots where F and B take one slot each: its basic unit idles D-2 slots, the bubble
// ratio (D-2)/(2N+D-2) of its Table 1, i.e. (D/2-1)(F+B) in our metric when F = B. Its direct concatenation
// keeps D-2 per step however many units; so does this order.
TEST(Chimera, PaperBubbleWhenForwardEqualsBackward) {
  for (int R = 2; R <= 12; R += 2) {
    for (int M = R; M <= 4 * R; M += R) {
      SCOPED_TRACE(testing::Message() << "R=" << R << " M=" << M);
      EXPECT_DOUBLE_EQ(bubble(R, M, "F=1,B=1"), (R / 2 - 1) * 2.0);
      EXPECT_DOUBLE_EQ(bubble(R, M, "F=2,B=2"), (R / 2 - 1) * 4.0);
    }
  }
}

// More units never add bubble: M = 2R, 3R, 4R idle exactly as long as the basic unit, whatever the costs,
// and that bubble is (D-2) max(F, B): at F=1, B=2 the basic unit's 4 at R=4 (above) and 12 at R=8. (Sorting
// each rank by slot alone, the paper's direct concatenation, adds to it with every unit when B = 2F: 2 per unit
// at R=4, 6 at R=8.)
TEST(Chimera, BubbleDoesNotGrowWithUnits) {
  for (int R = 2; R <= 12; R += 2) {
    for (const char* spec : {"F=1,B=2", "F=1,B=3", "F=2,B=3", "F=2,B=1"}) {
      const CostModel costs = CostModel::parse(spec);
      const double unit = bubble(R, R, spec);
      EXPECT_DOUBLE_EQ(unit, (R - 2) * std::max(costs.forward, costs.backward)) << "R=" << R << " " << spec;
      for (int M = 2 * R; M <= 4 * R; M += R) {
        EXPECT_DOUBLE_EQ(bubble(R, M, spec), unit) << "R=" << R << " M=" << M << " " << spec;
      }
    }
  }
  EXPECT_DOUBLE_EQ(bubble(8, 8, "F=1,B=2"), 12);
  EXPECT_DOUBLE_EQ(bubble(8, 32, "F=1,B=2"), 12);
}

// Each rank's actions of one stage are that stage's stream: 1F1B over the direction's M/2 micro-batches with
// min(M/2, R-s) warm-up forwards, one fewer at stages s < R/2.
TEST(Chimera, EachStageRunsItsOneFOneBStream) {
  for (int R = 2; R <= 8; R += 2) {
    for (int M = R; M <= 4 * R; M += R) {
      const Schedule s = make_chimera(options(R, M));
      for (int r = 0; r < R; ++r) {
        for (int d = 0; d < 2; ++d) {
          const int stage = d == 0 ? r : R - 1 - r, n = M / 2, half = R / 2;
          const int warmup = std::min(n, R - stage - (stage < half ? 1 : 0));
          auto mb = [&](int i) { return (i / half) * R + d * half + i % half; };
          std::vector<std::string> expected, got;
          int f = 0, b = 0;
          while (f < warmup) expected.push_back(to_string(Action::forward(stage, mb(f++))));
          while (f < n) {
            expected.push_back(to_string(Action::backward(stage, mb(b++))));
            expected.push_back(to_string(Action::forward(stage, mb(f++))));
          }
          while (b < n) expected.push_back(to_string(Action::backward(stage, mb(b++))));
          for (const Action& a : s.actions[r]) {
            if (a.stage == stage) got.push_back(to_string(a));  // the rank's other stage is R-1-stage
          }
          EXPECT_EQ(got, expected) << "R=" << R << " M=" << M << " rank " << r << " direction " << d;
        }
      }
    }
  }
}

TEST(Chimera, PlacementIsBidirectional) {
  const Schedule s = make_chimera(options(4, 8));
  EXPECT_EQ(s.kind, "chimera");
  EXPECT_EQ(s.num_stages, 4);
  EXPECT_EQ(s.placement, Placement::bidirectional(4, {0, 0, 1, 1, 0, 0, 1, 1}));
}

// Valid over a grid and under several cost models (no deadlock whatever the timing); every rank busy
// M (F+B) with two parameter copies; the basic unit idles less than 1F1B; more units never cost more than
// running the units one after another.
TEST(Chimera, ValidOverGrid) {
  for (int R = 2; R <= 12; R += 2) {
    const double unit_makespan = simulate(make_chimera(options(R, R)), CostModel{}).metrics.makespan;
    for (int M = R; M <= 4 * R; M += R) {
      SCOPED_TRACE(testing::Message() << "R=" << R << " M=" << M);
      const Schedule s = make_chimera(options(R, M));
      EXPECT_NO_THROW(validate(s));
      for (const char* spec : {"F=1,B=2", "F=1,B=1", "F=1,B=3,W=1", "F=2,B=1", "F=1,B=2,comm=0.5"}) {
        const CostModel costs = CostModel::parse(spec);
        const Simulation sim = simulate(s, costs);
        for (const RankMetrics& rm : sim.metrics.per_rank) {
          EXPECT_DOUBLE_EQ(rm.busy, M * (costs.forward + costs.backward)) << spec;
          EXPECT_EQ(rm.stages_held, 2);
        }
      }
      const Simulation sim = simulate(s, CostModel{});
      EXPECT_LE(sim.metrics.makespan, (M / R) * unit_makespan);
      if (M == R && R >= 4) {
        EXPECT_LT(sim.metrics.bubble, (R - 1) * 3.0);
      }
    }
  }
}

// The paper's Table 1: a Chimera worker holds between (D/2+1) and D micro-batches' activations of its stage.
TEST(Chimera, PeakActivationsInPaperRange) {
  for (int R = 2; R <= 16; R += 2) {
    for (int M = R; M <= 4 * R; M += R) {
      const std::vector<int> peaks = peak_activations(make_chimera(options(R, M)));
      int worst = 0;
      for (int r = 0; r < R; ++r) {
        EXPECT_GE(peaks[r], R / 2 + 1) << "R=" << R << " M=" << M << " rank " << r;
        EXPECT_LE(peaks[r], R) << "R=" << R << " M=" << M << " rank " << r;
        worst = std::max(worst, peaks[r]);
      }
      EXPECT_EQ(worst, R);
    }
  }
}

TEST(Chimera, RejectsWhatItCannotServe) {
  expect_chimera_invalid(options(3, 6), "even number of ranks");
  expect_chimera_invalid(options(3, 6), "R=3");
  expect_chimera_invalid(options(4, 6), "multiple of R");
  expect_chimera_invalid(options(4, 6), "M=6 for R=4");
  expect_chimera_invalid(options(4, 2), "multiple of R");
  expect_chimera_invalid(options(4, 8, 1), "2 stage(s) on each rank");
  expect_chimera_invalid(options(4, 0), "at least 1 micro-batch");
  EXPECT_NO_THROW(make_chimera(options(4, 8, 2)));
}

}  // namespace
}  // namespace dualpipe
