// The fractional activation-memory model (activation_memory.h, issue 12): peaks derived by hand on small
// schedules with w_mem < 1 and with recomputation, and the default model against spec section 2's integer count
// (written out again below) for all nine kinds.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/sim/activation_memory.h"
#include "dualpipe/sim/simulate.h"
#include "test_helpers.h"

namespace dualpipe {
namespace {

CostModel memory(double w_mem, bool recompute = false, double input_mem = 0.05) {
  CostModel c;
  c.w_mem = w_mem;
  c.recompute = recompute;
  c.input_mem = input_mem;
  return c;
}

void expect_peaks(const Schedule& s, const CostModel& c, const std::vector<double>& expected) {
  const std::vector<double> peaks = activation_peaks(s, c);
  ASSERT_EQ(peaks.size(), expected.size());
  for (std::size_t r = 0; r < expected.size(); ++r) EXPECT_NEAR(peaks[r], expected[r], 1e-12) << "rank " << r;
  const Metrics m = simulate(s, c).metrics;  // the simulator reports the same
  for (std::size_t r = 0; r < expected.size(); ++r) {
    EXPECT_NEAR(m.per_rank[r].peak_activations, expected[r], 1e-12) << "rank " << r;
    EXPECT_NEAR(m.per_rank[r].peak_activation_fraction, expected[r] / s.num_stages, 1e-12) << "rank " << r;
  }
}

// ZB-H1, R=2, M=3 (stage i emits F_x, I_{x-(1-i)}, W_{x-1}, spec section 6):
//   rank 0: 0F0 0F1 0I0 0W0 0F2 0I1 0W1 0I2 0W2
//   rank 1: 1F0 1I0 1F1 1I1 1W0 1F2 1I2 1W1 1W2
const char* kZbH1R2M3 =
    "rank 0: 0F0 0F1 0I0 0W0 0F2 0I1 0W1 0I2 0W2\n"
    "rank 1: 1F0 1I0 1F1 1I1 1W0 1F2 1I2 1W1 1W2\n";

TEST(ActivationMemory, WMemHalfOnZeroBubbleH1) {
  const Schedule s = parse_text(kZbH1R2M3);
  ASSERT_EQ(s.actions[0], make_zb_h1(ScheduleOptions{2, 3}).actions[0]);
  ASSERT_EQ(s.actions[1], make_zb_h1(ScheduleOptions{2, 3}).actions[1]);
  // w_mem = 0.5: an I frees half its unit, its W the other half.
  //   rank 0: 0F0 1, 0F1 2, 0I0 1.5, 0W0 1, 0F2 2, 0I1 1.5, 0W1 1, 0I2 0.5, 0W2 0           -> 2
  //   rank 1: 1F0 1, 1I0 0.5, 1F1 1.5, 1I1 1, 1W0 0.5, 1F2 1.5, 1I2 1, 1W1 0.5, 1W2 0      -> 1.5
  // (w_mem = 1: rank 1 goes 1 1 2 2 1 2 2 1 0 -> 2.)
  expect_peaks(s, memory(0.5), {2, 1.5});
  expect_peaks(s, memory(1), {2, 2});
  // w_mem = 0 frees everything at I: rank 1 1 0 1 0 0 1 0 0 0 -> 1.
  expect_peaks(s, memory(0), {2, 1});
}

TEST(ActivationMemory, WMemOnZeroBubbleH1LastRankOfFour) {
  // ZB-H1 R=4, M=8, rank 3 (i = 3: F_x, I_x, W_{x-3}):
  //   3F0 3I0 3F1 3I1 3F2 3I2 3F3 3I3 3W0 3F4 3I4 3W1 3F5 3I5 3W2 3F6 3I6 3W3 3F7 3I7 3W4 3W5 3W6 3W7
  // With w_mem = 0.366 each I leaves 0.366: after 3F3 three I's are pending W (1.098) plus 3F3's unit, 2.098;
  // from then on every F comes with three pending W's: 3 x 0.366 + 1 = 2.098 is the peak (integer count: 4).
  const Schedule s = make_zb_h1(ScheduleOptions{4, 8});
  const std::vector<double> peaks = activation_peaks(s, memory(0.366));
  EXPECT_NEAR(peaks[3], 1 + 3 * 0.366, 1e-12);
  // Rank 0 runs 0F0..0F3 before its first I (4 whole units): 4 whatever w_mem.
  EXPECT_NEAR(peaks[0], 4, 1e-12);
}

TEST(ActivationMemory, RecomputeOn1F1B) {
  // 1F1B R=2, M=2 with recompute, input_mem 0.05:
  //   rank 0: 0F0 0.05, 0F1 0.1, 0B0 re-runs 0F0: 0.05 + 1 = 1.05, then 0.05; 0B1: 1, then 0       -> 1.05
  //   rank 1: 1F0 0.05, 1B0 1 then 0, 1F1 0.05, 1B1 1 then 0                                       -> 1
  const Schedule s = make_1f1b(ScheduleOptions{2, 2});
  expect_peaks(s, memory(1, true), {1.05, 1});
  // Timing: every B takes F longer (F=1, B=2 -> 3):
  //   rank 0: 0F0 [0,1] 0F1 [1,2]; rank 1: 1F0 [1,2] 1B0 [2,5] 1F1 [5,6] 1B1 [6,9];
  //   rank 0: 0B0 [5,8] 0B1 [9,12]. Makespan 12 (9 without recompute).
  CostModel c = memory(1, true);
  const Simulation sim = simulate(s, c);
  EXPECT_DOUBLE_EQ(sim.metrics.makespan, 12);
  EXPECT_DOUBLE_EQ(sim.timeline[0][2].start, 5);
  EXPECT_DOUBLE_EQ(sim.timeline[0][3].start, 9);
  EXPECT_DOUBLE_EQ(sim.metrics.per_rank[1].busy, 1 + 3 + 1 + 3);
}

TEST(ActivationMemory, RecomputeWithSplitBackward) {
  // ZB-H1 R=2, M=3, recompute, input_mem 0.1, w_mem 0.5:
  //   rank 0: 0F0 .1, 0F1 .2, 0I0 re-runs: .1 + 1 = 1.1, then .1 + .5 = .6, 0W0 .1, 0F2 .2,
  //           0I1 1.1 then .6, 0W1 .1, 0I2 1 then .5, 0W2 0                                        -> 1.1
  //   rank 1: 1F0 .1, 1I0 1 then .5, 1F1 .6, 1I1 .5 + 1 = 1.5 then 1, 1W0 .5, 1F2 .6, 1I2 1.5 then 1,
  //           1W1 .5, 1W2 0                                                                         -> 1.5
  expect_peaks(parse_text(kZbH1R2M3), memory(0.5, true, 0.1), {1.1, 1.5});
}

TEST(ActivationMemory, RecomputeInAnOverlappedPair) {
  // One rank holding both stages, input_mem 0.25:
  //   0F0 .25, 1F0 .5, (0F1;1B0): 1B0 re-runs 1F0, .25 + 1 = 1.25, at its end 1B0 is freed and 0F1 keeps its
  //   input: .5; 0B0: .25 + 1 = 1.25 then .25; 1F1 .5; 1B1 1.25 then .25; 0B1 1 then 0            -> 1.25
  // Without recompute the pair does not raise the count: 1 2 2 1 2 1 0 -> 2.
  const Schedule s = parse_text("rank 0: 0F0 1F0 (0F1;1B0) 0B0 1F1 1B1 0B1\n");
  EXPECT_NEAR(activation_peaks(s, memory(1, true, 0.25))[0], 1.25, 1e-12);
  EXPECT_NEAR(activation_peaks(s, memory(1))[0], 2, 1e-12);
  // The pair's backward half takes F longer: FB unset, F=1 B=2: 1 + 2 + 1 = 4.
  EXPECT_DOUBLE_EQ(memory(1, true).duration(s.actions[0][2]), 4);
}

// Spec section 2's integer count, written out again: +1 at each F and pair's F, -1 at each B, W and pair's B.
std::vector<int> spec_count(const Schedule& s) {
  std::vector<int> peaks;
  for (const auto& actions : s.actions) {
    int live = 0, peak = 0;
    for (const Action& a : actions) {
      if (a.type == ActionType::Forward) ++live;
      if (a.type == ActionType::Backward || a.type == ActionType::BackwardWeight) --live;
      peak = std::max(peak, live);
    }
    peaks.push_back(peak);
  }
  return peaks;
}

TEST(ActivationMemory, DefaultModelIsTheIntegerCountForEveryKind) {
  int checked = 0;
  for (const test::GridSchedule& g : test::grid_schedules([](int R) { return std::vector<int>{2 * R, 3 * R + 1}; })) {
    SCOPED_TRACE(g.name + " R=" + std::to_string(g.R) + " M=" + std::to_string(g.M));
    const std::vector<int> expected = spec_count(g.schedule);
    const std::vector<double> peaks = activation_peaks(g.schedule, CostModel{});
    ASSERT_EQ(peaks.size(), expected.size());
    for (std::size_t r = 0; r < peaks.size(); ++r) EXPECT_EQ(peaks[r], static_cast<double>(expected[r]));
    EXPECT_EQ(peak_activations(g.schedule), expected);
    ++checked;
  }
  EXPECT_GT(checked, 50);
  // The published peaks (spec section 3) at R=4, M=8 on the worst rank.
  auto worst = [](const char* kind) {
    return simulate(make_schedule(kind, ScheduleOptions{4, 8}), CostModel{}).metrics.peak_activations();
  };
  EXPECT_EQ(worst("gpipe"), 8);      // M
  EXPECT_EQ(worst("1f1b"), 4);       // S
  EXPECT_EQ(worst("zb-h1"), 4);      // S
  EXPECT_EQ(worst("dualpipe"), 5);   // S + 1
  EXPECT_EQ(worst("dualpipev"), 9);  // S + 1 with S = 2R
}

TEST(ActivationMemory, TenKindsAreAllCovered) {
  std::vector<std::string> kinds;
  for (const GeneratorInfo& g : generators()) kinds.emplace_back(g.name);
  EXPECT_EQ(kinds.size(), 10u);
}

}  // namespace
}  // namespace dualpipe
