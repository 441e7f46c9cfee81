// Chimera: pinned orders and a timeline worked out by hand from the merge rule (two 1F1B pipelines in
// opposite directions, merged per rank by standalone start time), validity over a grid, and the paper's
// activation-memory range.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "dualpipe/error.h"
#include "dualpipe/generators.h"
#include "dualpipe/simulate.h"
#include "dualpipe/text_format.h"
#include "dualpipe/validate.h"

namespace dualpipe {
namespace {

ScheduleOptions options(int R, int M, int v = 0) {
  ScheduleOptions o;
  o.num_ranks = R;
  o.num_microbatches = M;
  o.stages_per_rank = v;
  return o;
}

void expect_invalid(const ScheduleOptions& o, const std::string& rule) {
  try {
    make_chimera(o);
    ADD_FAILURE() << "expected InvalidArgument mentioning '" << rule << "'";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(rule), std::string::npos) << e.what();
  }
}

// Worked by hand. R=4, M=4: micro-batches 0,1 go down (stage s on rank s), 2,3 go up (stage s on rank 3-s).
// Standalone 1F1B with 4 stages and 2 micro-batches (warm-up min(3-s, 2)), timed with F=1, B=2, start times:
//   stage 0: F0@0 F1@1 B0@10 B1@13      stage 1: F0@1 F1@2 B0@8 B1@11
//   stage 2: F0@2 F1@3 B0@6  B1@9       stage 3: F0@3 B0@4 F1@6 B1@7
// Rank r merges down stage r with up stage 3-r (micro-batches +2) by those times, down first on ties.
const char* const kR4M4 =
    "rank 0: 0F0 0F1 3F2 3B2 3F3 3B3 0B0 0B1\n"
    "rank 1: 1F0 1F1 2F2 2F3 2B2 1B0 2B3 1B1\n"
    "rank 2: 1F2 2F0 1F3 2F1 2B0 1B2 2B1 1B3\n"
    "rank 3: 0F2 0F3 3F0 3B0 3F1 3B1 0B2 0B3\n";

TEST(Chimera, PinnedOrderR4M4) { EXPECT_EQ(format_text(make_chimera(options(4, 4))), kR4M4); }

// Worked by hand. R=2: one micro-batch each way per unit (standalone: stage 0 F@0 B@4, stage 1 F@1 B@2);
// M=4 is two units, the second appended after the first on every rank.
TEST(Chimera, PinnedOrderR2M4TwoUnits) {
  EXPECT_EQ(format_text(make_chimera(options(2, 4))),
            "rank 0: 0F0 1F1 1B1 0B0 0F2 1F3 1B3 0B2\n"
            "rank 1: 0F1 1F0 1B0 0B1 0F3 1F2 1B2 0B3\n");
}

// The timeline of kR4M4 simulated by hand with F=1, B=2: every rank is busy 4 x F + 4 x B = 12 and the last
// backwards (0B1 on rank 0, 0B3 on rank 3) end at 17, so the makespan is 17 and the bubble 5.
TEST(Chimera, BasicUnitTimelineR4) {
  const Simulation sim = simulate(make_chimera(options(4, 4)), CostModel{});
  EXPECT_DOUBLE_EQ(sim.metrics.makespan, 17);
  EXPECT_DOUBLE_EQ(sim.metrics.bubble, 5);
  // Two independent checks: 1F1B on the same ranks and micro-batches idles (R-1)(F+B) = 9.
  EXPECT_DOUBLE_EQ(simulate(make_1f1b(options(4, 4)), CostModel{}).metrics.bubble, 9);
}

// With two ranks each direction carries one micro-batch and the two fill each other's gaps exactly: the
// paper's basic-unit bubble (R/2-1)(F+B) is zero.
TEST(Chimera, TwoRanksHaveNoBubble) {
  for (int M = 2; M <= 8; M += 2) {
    const Simulation sim = simulate(make_chimera(options(2, M)), CostModel{});
    EXPECT_DOUBLE_EQ(sim.metrics.bubble, 0) << "M=" << M;
    EXPECT_DOUBLE_EQ(sim.metrics.makespan, 3 * M) << "M=" << M;
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
      for (const char* spec : {"F=1,B=2", "F=1,B=1", "F=1,B=3,W=1", "F=1,B=2,comm=0.5"}) {
        const CostModel costs = CostModel::parse(spec);
        const Simulation sim = simulate(s, costs);
        for (const RankMetrics& rm : sim.metrics.per_rank) {
          EXPECT_DOUBLE_EQ(rm.busy, M * (costs.forward + costs.backward)) << spec;
          EXPECT_EQ(rm.parameter_copies, 2);
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
    for (int M = R; M <= 3 * R; M += R) {
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
  expect_invalid(options(3, 6), "even number of ranks");
  expect_invalid(options(3, 6), "R=3");
  expect_invalid(options(4, 6), "multiple of R");
  expect_invalid(options(4, 6), "M=6 for R=4");
  expect_invalid(options(4, 2), "multiple of R");
  expect_invalid(options(4, 8, 1), "2 stage(s) on each rank");
  expect_invalid(options(4, 0), "at least 1 micro-batch");
  EXPECT_NO_THROW(make_chimera(options(4, 8, 2)));
}

}  // namespace
}  // namespace dualpipe
