// Spec section 2's metric definitions on tiny schedules whose timelines are computed by hand in the
// comments, and CostModel parsing.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/lower.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/sim/cost_model.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/sim/trace_costs.h"
#include "dualpipe/trace/trace.h"
#include "test_helpers.h"

namespace dualpipe {
namespace {

using test::contains;
using test::costs;

// ================================================================================================
// Spec section 2: metric definitions on tiny hand-computed schedules.
// ================================================================================================

// R=2, S=2 (stage s on rank s), M=2, with a split backward, an overlapped pair and uneven stages:
//   rank 0: 0F0 0F1 0I0 0W0 0B1
//   rank 1: 1F0 (1F1;1B0) 1I1 1W1
constexpr const char* kTiny =
    "rank 0: 0F0 0F1 0I0 0W0 0B1\n"
    "rank 1: 1F0 (1F1;1B0) 1I1 1W1\n";

TEST(SimulateMetrics, HandComputedTimeline) {
  // Costs F=1 B=3 W=1 (so I=2), FB=3.5, comm=0.5, stage scale 1 and 2.
  //  Durations: 0F=1 0I=2 0W=1 0B=3; 1F=2 1I=4 1W=2;
  //  the pair: FB scaled like its separate halves, 3.5 * (1*2 + 3*2) / (1+3) = 7.
  //  rank 0: 0F0 [0,1]  0F1 [1,2]
  //  rank 1: 1F0 waits for 0F0 + comm: [1.5,3.5]
  //          (1F1;1B0): 0F1 + comm = 2.5, 1F0 local = 3.5 (no comm on a same-rank edge) -> [3.5,10.5]
  //          1I1 [10.5,14.5]  1W1 [14.5,16.5]
  //  rank 0: 0I0 waits for 1B0 + comm = 11: [11,13]  0W0 [13,14]  0B1 waits for 1I1 + comm = 15: [15,18]
  //  makespan 18; rank 0 busy 1+1+2+1+3 = 8, idle 10, span 18; rank 1 busy 2+7+4+2 = 15, idle 3,
  //  span 16.5-1.5 = 15. bubble = max idle = 10; bubble rate = (max span 18 - max busy 15) / 18 = 1/6.
  CostModel c = costs(1, 3, 1, 3.5, 0.5);
  c.stage_scale = {1, 2};
  const Schedule s = parse_text(kTiny);
  const Simulation sim = simulate(s, c);
  const std::vector<std::vector<ActionTime>> expected = {
      {{0, 1}, {1, 2}, {11, 13}, {13, 14}, {15, 18}},
      {{1.5, 3.5}, {3.5, 10.5}, {10.5, 14.5}, {14.5, 16.5}},
  };
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(sim.timeline[r].size(), expected[r].size());
    for (std::size_t i = 0; i < expected[r].size(); ++i) {
      EXPECT_DOUBLE_EQ(sim.timeline[r][i].start, expected[r][i].start) << "rank " << r << " action " << i;
      EXPECT_DOUBLE_EQ(sim.timeline[r][i].end, expected[r][i].end) << "rank " << r << " action " << i;
    }
  }
  const Metrics& m = sim.metrics;
  EXPECT_DOUBLE_EQ(m.makespan, 18);
  test::expect_busy_idle_span(m.per_rank[0], 8, 10, 18);
  test::expect_busy_idle_span(m.per_rank[1], 15, 3, 15);
  EXPECT_DOUBLE_EQ(m.bubble, 10);
  EXPECT_DOUBLE_EQ(m.bubble_rate, 3.0 / 18.0);
  // Peak activations: rank 0 0F0 1, 0F1 2, 0I0 2 (I keeps it), 0W0 1, 0B1 0 -> 2;
  // rank 1 1F0 1, the pair adds 1F1 and frees 1B0 at its end -> 1, 1I1 1, 1W1 0 -> 1.
  EXPECT_EQ(m.per_rank[0].peak_activations, 2);
  EXPECT_EQ(m.per_rank[1].peak_activations, 1);
  EXPECT_EQ(m.peak_activations(), 2);
  EXPECT_DOUBLE_EQ(m.per_rank[0].peak_activation_fraction, 1.0);  // 2 of S=2 stages
  EXPECT_DOUBLE_EQ(m.per_rank[1].peak_activation_fraction, 0.5);
  EXPECT_EQ(m.per_rank[0].stages_held, 1);
  EXPECT_DOUBLE_EQ(m.per_rank[1].parameter_copies, 1);
  EXPECT_EQ(m.per_rank[0].rank, 0);
  EXPECT_EQ(m.per_rank[1].rank, 1);
}

// The host's time between a rank's actions (gap) delays its next action and overlaps its waits for messages.
TEST(SimulateMetrics, HostGapBetweenActionsOverlapsTheWaits) {
  // kTiny with F=1 B=3 W=1 FB=3.5, comm=0.5, gap=0.25, stage scale 1 and 2 (durations as above):
  //  rank 0: 0F0 [0,1]  0F1 [1.25,2.25]
  //  rank 1: 1F0 waits for 0F0 + comm = 1.5: [1.5,3.5]; the pair: 0F1 + comm = 2.75, 3.5 + gap = 3.75 -> [3.75,10.75]
  //          1I1 [11,15]  1W1 [15.25,17.25]
  //  rank 0: 0I0: 0F1 + gap = 2.5, 1B0 + comm = 11.25 -> [11.25,13.25]  0W0 [13.5,14.5]
  //          0B1: 14.75 and 1I1 + comm = 15.5 -> [15.5,18.5]
  CostModel c = costs(1, 3, 1, 3.5, 0.5);
  c.stage_scale = {1, 2};
  c.gap = 0.25;
  const Simulation sim = simulate(parse_text(kTiny), c);
  const std::vector<std::vector<ActionTime>> expected = {
      {{0, 1}, {1.25, 2.25}, {11.25, 13.25}, {13.5, 14.5}, {15.5, 18.5}},
      {{1.5, 3.5}, {3.75, 10.75}, {11, 15}, {15.25, 17.25}},
  };
  for (int r = 0; r < 2; ++r)
    for (std::size_t i = 0; i < expected[r].size(); ++i) {
      EXPECT_DOUBLE_EQ(sim.timeline[r][i].start, expected[r][i].start) << "rank " << r << " action " << i;
      EXPECT_DOUBLE_EQ(sim.timeline[r][i].end, expected[r][i].end) << "rank " << r << " action " << i;
    }
  EXPECT_DOUBLE_EQ(sim.metrics.makespan, 18.5);
  // The gap is not busy time: rank 0 computes 8 of its 18.5.
  test::expect_busy_idle_span(sim.metrics.per_rank[0], 8, 10.5, 18.5);
  EXPECT_EQ(CostModel::parse("F=1,gap=0.25").gap, 0.25);
  EXPECT_TRUE(contains(CostModel::parse("gap=0.25").to_string(), ",gap=0.25"));
  EXPECT_TRUE(contains(test::error_message([] { CostModel::parse("gap=-1"); }), "cost gap must not be negative"));
}

// simulate --from-trace reads gap and comm from a dualpipe trace as plan --from-kineto does from profiler traces of
// the schedule that ran. 1F1B, R = 2, M = 2 (rank 0: F0 F1 B0 B1; rank 1: F0 B0 F1 B1), times in microseconds:
//   waits for a message, the consumer's rank idle: rank 1's F0 2 after rank 0's F0; rank 0's B0 3 after rank 1's
//   B0 and its B1 7 after rank 1's B1: comm = mean 4 us;
//   gaps, every input there when the previous action ended: rank 0's F1 0 (a SEND between is no action of its
//   own); rank 1's B0 0, F1 1 and B1 0: gap = 0.25 us. A second step's gaps of 1 and 1 make it 3/6 = 0.5 us.
TEST(SimulateMetrics, TheGapAndTheMessagesOfADualpipeTrace) {
  Trace trace;
  trace.num_ranks = 2, trace.num_stages = 2, trace.num_microbatches = 2;
  const auto add = [&](int rank, int step, const char* action, double start, double end) {
    TraceEvent e;
    e.action = parse_action(action), e.rank = rank, e.step = step, e.start = start, e.duration = end - start;
    trace.events.push_back(e);
  };
  add(0, 1, "0F0", 0, 10), add(0, 1, "0F1", 10, 20), add(0, 1, "0SEND_F1", 20, 21), add(0, 1, "0B0", 45, 65);
  add(0, 1, "0B1", 80, 100);
  add(1, 1, "1F0", 12, 22), add(1, 1, "1B0", 22, 42), add(1, 1, "1F1", 43, 53), add(1, 1, "1B1", 53, 73);
  CostModel c;
  take_waits_from_trace(c, trace);
  EXPECT_DOUBLE_EQ(c.gap, 0.00025);  // milliseconds, as the other costs of simulate --from-trace
  EXPECT_DOUBLE_EQ(c.comm, 0.004);
  add(0, 2, "0F0", 200, 210), add(0, 2, "0F1", 211, 220), add(0, 2, "0B0", 221, 230);
  c = CostModel{};
  take_waits_from_trace(c, trace);
  EXPECT_DOUBLE_EQ(c.gap, 0.0005);
  c.gap = 0.5, c.comm = 0.25;  // given: kept
  take_waits_from_trace(c, trace);
  EXPECT_DOUBLE_EQ(c.gap, 0.5);
  EXPECT_DOUBLE_EQ(c.comm, 0.25);
}

TEST(SimulateMetrics, OverlappedPairDefaultsToFPlusB) {
  // Same schedule, FB unset: the pair costs 1*2 + 3*2 = 8, so rank 1: 1F0 [1.5,3.5], pair [3.5,11.5],
  // 1I1 [11.5,15.5], 1W1 [15.5,17.5]; rank 0: 0I0 [12,14], 0W0 [14,15], 0B1 [16,19]. Makespan 19.
  CostModel c = costs(1, 3, 1, -1, 0.5);
  c.stage_scale = {1, 2};
  const Simulation sim = simulate(parse_text(kTiny), c);
  EXPECT_DOUBLE_EQ(sim.timeline[1][1].end - sim.timeline[1][1].start, 8);
  EXPECT_DOUBLE_EQ(sim.metrics.makespan, 19);
}

TEST(SimulateMetrics, NoCommNoScale) {
  // F=1 B=3 W=1 FB=3.5, uniform, comm 0: rank 0: 0F0 [0,1] 0F1 [1,2]; rank 1: 1F0 [1,2],
  // pair [2,5.5], 1I1 [5.5,7.5], 1W1 [7.5,8.5]; rank 0: 0I0 [5.5,7.5] 0W0 [7.5,8.5] 0B1 [8.5,11.5].
  const Simulation sim = simulate(parse_text(kTiny), costs(1, 3, 1, 3.5));
  EXPECT_DOUBLE_EQ(sim.timeline[1][1].start, 2);
  EXPECT_DOUBLE_EQ(sim.timeline[1][1].end, 5.5);
  EXPECT_DOUBLE_EQ(sim.timeline[0][4].start, 8.5);
  EXPECT_DOUBLE_EQ(sim.metrics.makespan, 11.5);
  EXPECT_DOUBLE_EQ(sim.metrics.per_rank[0].busy, 1 + 1 + 2 + 1 + 3);
  EXPECT_DOUBLE_EQ(sim.metrics.per_rank[1].busy, 1 + 3.5 + 2 + 1);
  EXPECT_DOUBLE_EQ(sim.metrics.bubble, 11.5 - 7.5);
}

TEST(SimulateMetrics, CommLatencyOnlyOnCrossRankEdges) {
  // One rank holding both stages (a V on R=1): 0F0 1F0 1B0 0B0 with default costs takes 1+1+2+2 = 6
  // whatever the latency, because no dependency crosses ranks.
  const Schedule v = parse_text("rank 0: 0F0 1F0 1B0 0B0\n");
  EXPECT_DOUBLE_EQ(simulate(v, costs(1, 2, 1, -1, 5)).metrics.makespan, 6);

  // 1F1B R=2 M=2 (rank 0: 0F0 0F1 0B0 0B1, rank 1: 1F0 1B0 1F1 1B1), F=1 B=2:
  //  comm 0:   1F0 [1,2] 1B0 [2,4] 1F1 [4,5] 1B1 [5,7]; 0B0 [4,6] 0B1 [7,9]        -> makespan 9
  //  comm 0.5: 1F0 [1.5,2.5] 1B0 [2.5,4.5] 1F1 [4.5,5.5] 1B1 [5.5,7.5];
  //            0B0 [5,7] 0B1 [8,10]                                                -> makespan 10
  //  Four crossings on the critical path would add 2; only 0F0->1F0 and 1B1->0B1 are on it.
  const Schedule s = make_1f1b(ScheduleOptions{2, 2});
  EXPECT_DOUBLE_EQ(simulate(s, costs(1, 2, 1)).metrics.makespan, 9);
  const Simulation late = simulate(s, costs(1, 2, 1, -1, 0.5));
  EXPECT_DOUBLE_EQ(late.metrics.makespan, 10);
  EXPECT_DOUBLE_EQ(late.timeline[1][0].start, 1.5);
  EXPECT_DOUBLE_EQ(late.timeline[0][2].start, 5);
  EXPECT_DOUBLE_EQ(late.timeline[0][3].start, 8);
  // Idle and span: rank 0 busy 6, span 10; rank 1 busy 6, span 7.5-1.5 = 6; bubble 4; rate (10-6)/10.
  EXPECT_DOUBLE_EQ(late.metrics.bubble, 4);
  EXPECT_DOUBLE_EQ(late.metrics.per_rank[1].span, 6);
  EXPECT_DOUBLE_EQ(late.metrics.bubble_rate, 0.4);
}

TEST(SimulateMetrics, AllToAllLengthensForwardsAndInputGradientsButNotWeightGradients) {
  // 1F1B R=2 M=2 with F=1 B=2 a2a=1, without overlap (pair=off): a forward takes 2, a backward 3.
  //  rank 0: 0F0 [0,2] 0F1 [2,4]; rank 1: 1F0 [2,4] 1B0 [4,7] 1F1 [7,9] 1B1 [9,12];
  //  rank 0: 0B0 [7,10] 0B1 [12,15]                                                  -> makespan 15
  CostModel c = costs(1, 2, 1);
  c.all_to_all = 1;
  c.pair = PairMode::Off;
  EXPECT_DOUBLE_EQ(simulate(make_1f1b(ScheduleOptions{2, 2}), c).metrics.makespan, 15);
  // As phases (the default) a backward takes 2.5: its experts' W (0.5) runs under the dispatch's gradient (0.5).
  //  rank 1: 1B0 [4,6.5] 1F1 [6.5,8.5] 1B1 [8.5,11]; rank 0: 0B0 [6.5,9] 0B1 [11,13.5]  -> makespan 13.5
  c.pair = PairMode::Phases;
  EXPECT_DOUBLE_EQ(simulate(make_1f1b(ScheduleOptions{2, 2}), c).metrics.makespan, 13.5);
  // Split backward: I = B - W + a2a = 2, W = 1 (no exchange).
  EXPECT_DOUBLE_EQ(c.duration(Action::backward_input(0, 0)), 2);
  EXPECT_DOUBLE_EQ(c.duration(Action::backward_weight(0, 0)), 1);
  // A pair hides each half's exchanges behind the other's compute (phase by phase, sim/phase_pair.h): here bound
  // by its compute, F + B, then by its exchanges sharing the link.
  EXPECT_DOUBLE_EQ(c.duration(Action::overlapped(0, 1, 1, 0)), 3);
  c.all_to_all = 2.5;
  EXPECT_DOUBLE_EQ(c.duration(Action::overlapped(0, 1, 1, 0)), 5);
  // A given FB is the whole pair, exchanges included.
  c.overlapped = 7;
  EXPECT_DOUBLE_EQ(c.duration(Action::overlapped(0, 1, 1, 0)), 7);
  // Parsed, printed (with the pair's default made explicit), and refused when negative.
  const CostModel parsed = CostModel::parse("F=1,B=2,W=1,a2a=2");
  EXPECT_DOUBLE_EQ(parsed.all_to_all, 2);
  EXPECT_EQ(parsed.to_string(), "F=1,B=2,W=1,FB=4,comm=0,a2a=2");
  EXPECT_TRUE(contains(test::error_message([] { CostModel::parse("a2a=-1"); }), "a2a=-1"));
}

TEST(SimulateMetrics, StageScaleMultipliesEveryCost) {
  // GPipe R=2 M=1 with stage 1 three times as heavy: 0F0 [0,1], 1F0 [1,4], 1B0 [4,10], 0B0 [10,12].
  CostModel c = costs(1, 2, 1);
  c.stage_scale = {1, 3};
  const Simulation sim = simulate(make_gpipe(ScheduleOptions{2, 1}), c);
  EXPECT_DOUBLE_EQ(sim.metrics.makespan, 12);
  EXPECT_DOUBLE_EQ(sim.metrics.per_rank[0].busy, 3);
  EXPECT_DOUBLE_EQ(sim.metrics.per_rank[1].busy, 9);
  EXPECT_DOUBLE_EQ(sim.metrics.bubble, 9);              // rank 0 idles 12 - 3
  EXPECT_DOUBLE_EQ(sim.metrics.bubble_rate, (12.0 - 9.0) / 12.0);
  // The split backward: I = (B-W) * scale, W = W * scale.
  EXPECT_DOUBLE_EQ(c.duration(Action::backward_input(1, 0)), 3);
  EXPECT_DOUBLE_EQ(c.duration(Action::backward_weight(1, 0)), 3);
  EXPECT_DOUBLE_EQ(c.duration(Action::backward_input(0, 0)), 1);
  EXPECT_DOUBLE_EQ(c.duration(Action::communication(ActionType::SendForward, 1, 0, 0)), 0);
}

TEST(SimulateMetrics, PeakActivationRules) {
  // A pair adds its forward's unit and frees its backward's at its end, so it never raises the count in
  // between: 0F0 1, 1F0 2, (0F1;1B0) 2 (not 3), 0B0 1, 1F1 2, 1B1 1, 0I1 1 (I keeps it), 0W1 0 -> peak 2.
  const Schedule pair = parse_text("rank 0: 0F0 1F0 (0F1;1B0) 0B0 1F1 1B1 0I1 0W1\n");
  EXPECT_EQ(peak_activations(pair), std::vector<int>{2});
  // An I does not free its activation; its W does: 0F0 1, 0I0 1, 0F1 2, 0W0 1, 0I1 1, 0W1 0 -> 2.
  const Schedule split = parse_text("rank 0: 0F0 0I0 0F1 0W0 0I1 0W1\n");
  EXPECT_EQ(peak_activations(split), std::vector<int>{2});
  // A full B frees at once: 0F0 1, 0B0 0, 0F1 1, 0B1 0 -> 1.
  EXPECT_EQ(peak_activations(parse_text("rank 0: 0F0 0B0 0F1 0B1\n")), std::vector<int>{1});
  // Communication actions do not count.
  const Schedule lowered = lower_communication(make_1f1b(ScheduleOptions{4, 8}));
  EXPECT_EQ(peak_activations(lowered), (std::vector<int>{4, 3, 2, 1}));
  // The simulator reports the same per rank, and the fraction of the model (units / S).
  const Metrics m = simulate(pair, CostModel{}).metrics;
  EXPECT_EQ(m.per_rank[0].peak_activations, 2);
  EXPECT_DOUBLE_EQ(m.per_rank[0].peak_activation_fraction, 1.0);
  EXPECT_DOUBLE_EQ(m.per_rank[0].peak_activation_bytes, 0.0) << "no act_bytes given";
}

TEST(SimulateMetrics, PeakActivationBytesAreTheCountTimesTheUnit) {
  // 1F1B at R=4: 4 3 2 1 stage activations at the peak (PeakActivationRules), 1.5 MB each.
  const Metrics m = simulate(make_1f1b(ScheduleOptions{4, 8}), CostModel::parse("act_bytes=1.5e6")).metrics;
  const double expected[] = {6e6, 4.5e6, 3e6, 1.5e6};
  for (int r = 0; r < 4; ++r) EXPECT_DOUBLE_EQ(m.per_rank[r].peak_activation_bytes, expected[r]) << "rank " << r;
}

TEST(SimulateMetrics, ParameterCopiesAndStagesHeld) {
  // The DualPipe paper's Table 2: parameters 2x for DualPipe, 1x for 1F1B and ZB1P; DualPipeV (DeepSeek's README)
  // and ZBV hold one copy in two chunks; Chimera (Li & Hoefler 2021) two replicas, so two copies.
  auto rank0 = [](const char* kind) {
    return simulate(make_schedule(kind, ScheduleOptions{4, 8}), CostModel{}).metrics.per_rank[0];
  };
  for (const auto& [kind, copies, chunks] : std::vector<std::tuple<const char*, double, int>>{
           {"gpipe", 1, 1}, {"1f1b", 1, 1}, {"zb-h1", 1, 1}, {"dualpipe", 2, 2}, {"chimera", 2, 2},
           {"dualpipev", 1, 2}, {"zbv", 1, 2}, {"interleaved-1f1b", 1, 2}}) {
    EXPECT_DOUBLE_EQ(rank0(kind).parameter_copies, copies) << kind;
    EXPECT_EQ(rank0(kind).stages_held, chunks) << kind;
  }
}

TEST(SimulateMetrics, LoweredScheduleBusyCountsComputeOnly) {
  const Schedule s = make_1f1b(ScheduleOptions{2, 2});
  const Metrics a = simulate(s, costs(1, 2, 1)).metrics;
  const Metrics b = simulate(lower_communication(s), costs(1, 2, 1)).metrics;
  EXPECT_DOUBLE_EQ(a.per_rank[0].busy, b.per_rank[0].busy);
  EXPECT_DOUBLE_EQ(a.bubble, b.bubble);
}

TEST(SimulateMetrics, BadCostsAreRejected) {
  EXPECT_THROW(simulate(make_gpipe(ScheduleOptions{2, 2}), costs(1, 2, 3)), InvalidArgument);  // W > B
  CostModel infinite;
  infinite.forward = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(contains(test::error_message([&] { infinite.check(); }), "costs must be finite numbers"));
}

// Each cost is finite, but two of them add up past the largest double: the step time would be inf and the
// metrics NaN (found by UBSan's float-divide-by-zero in the picture's axis, scripts/test_sanitized.sh).
TEST(SimulateMetrics, CostsWhoseSumOverflowsAreRejected) {
  const Schedule gpipe = make_gpipe(ScheduleOptions{2, 2});
  const std::string message =
      test::error_message([&] { simulate(gpipe, CostModel::parse("F=1e308,B=1e308,W=1")); });
  EXPECT_TRUE(contains(message, "too large to simulate")) << message;
  EXPECT_TRUE(contains(message, "F=1e+308")) << message;
  // The same ratios in a larger unit simulate fine.
  EXPECT_GT(simulate(gpipe, CostModel::parse("F=1e300,B=1e300,W=1")).metrics.makespan, 1e300);
}

// ================================================================================================
// CostModel::parse
// ================================================================================================

TEST(CostModelParse, GoodInputs) {
  const CostModel d = CostModel::parse("");
  EXPECT_EQ(d.forward, 1);
  EXPECT_EQ(d.backward, 2);
  EXPECT_EQ(d.weight, 1);
  EXPECT_FALSE(d.overlapped.has_value());
  EXPECT_EQ(d.comm, 0);
  EXPECT_TRUE(d.stage_scale.empty());
  EXPECT_EQ(d.to_string(), "F=1,B=2,W=1,FB=3,comm=0");  // FB shown as F+B when unset

  const CostModel c = CostModel::parse("F=1.5,B=3,W=1,FB=4,comm=0.25");
  EXPECT_EQ(c.forward, 1.5);
  EXPECT_EQ(c.backward, 3);
  EXPECT_EQ(c.weight, 1);
  ASSERT_TRUE(c.overlapped.has_value());
  EXPECT_EQ(*c.overlapped, 4);
  EXPECT_EQ(c.comm, 0.25);
  EXPECT_EQ(c.to_string(), "F=1.5,B=3,W=1,FB=4,comm=0.25");

  // Any subset, any order, keys case-insensitive (empty items are refused: test_cost_parse.cpp).
  const CostModel k = CostModel::parse("comm=1,fb=2.5,f=2,b=4,w=0");
  EXPECT_EQ(k.forward, 2);
  EXPECT_EQ(k.backward, 4);
  EXPECT_EQ(k.weight, 0);
  EXPECT_EQ(*k.overlapped, 2.5);
  EXPECT_EQ(k.comm, 1);

  const CostModel s = CostModel::parse("scale=1:1:2");
  EXPECT_EQ(s.stage_scale, (std::vector<double>{1, 1, 2}));
  EXPECT_EQ(s.scale(2), 2);
  EXPECT_EQ(s.to_string(), "F=1,B=2,W=1,FB=3,comm=0,scale=1:1:2");
  // Round trip through the canonical form.
  EXPECT_EQ(CostModel::parse(c.to_string()).to_string(), c.to_string());
  EXPECT_EQ(CostModel::parse(s.to_string()).stage_scale, s.stage_scale);
}

TEST(CostModelParse, BadInputsNameTheKeyOrValue) {
  struct Bad {
    const char* spec;
    const char* mentions;
  };
  const Bad bad[] = {
      {"F=abc", "abc"},        // not a number
      {"F=", "F"},             // empty value
      {"F=1e999", "1e999"},    // not finite
      {"B=nan", "nan"},
      {"Q=1", "'Q'"},          // unknown key
      {"F", "'F'"},            // not KEY=VALUE
      {"F=0", "F=0"},          // F must be positive
      {"B=-1", "B=-1"},
      {"W=3", "W=3"},          // W is part of B (default B=2)
      {"W=-1", "W=-1"},
      {"FB=0", "FB=0"},
      {"comm=-0.5", "comm=-0.5"},
      {"act_bytes=-1", "act_bytes=-1"},
      {"scale=1:0", "stage 1"},  // multipliers must be positive
      {"scale=1::2", "scale"},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.spec);
    const std::string m = test::error_message([&] { CostModel::parse(b.spec); });
    EXPECT_TRUE(contains(m, b.mentions)) << m;
  }
}

}  // namespace
}  // namespace dualpipe
