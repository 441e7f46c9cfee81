// Costs read from the record_function regions of PyTorch profiler traces laid out by hand: whole actions by their
// medians, DeepSeek's phases summed per chunk pair, stages named by " stage N", several ranks read together, and
// the schedule a traced run names simulated beside its measured step. The answers follow from the layouts.
#include <gtest/gtest.h>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/sim/kineto_costs.h"
#include "dualpipe/sim/kineto_plan.h"
#include "dualpipe/util/error.h"
#include "sim/kineto_trace_text.h"
#include "test_helpers.h"

namespace dualpipe {
namespace {

// Complete events on process 1, thread 1.
struct Laid {
  std::string cat, name;
  double ts, dur;
};

KinetoSummary summary_of(const std::vector<Laid>& events) {
  std::vector<std::string> texts;
  for (const Laid& e : events) texts.push_back(test::kineto_event(e.cat, e.name, 1, 1, e.ts, e.dur));
  return summarize_kineto(parse_kineto_trace(test::kineto_trace(texts), "laid.json"));
}

// Regions one after another from time 0, each with one operator that fills it.
std::vector<Laid> regions_in_turn(const std::vector<std::tuple<std::string, std::string, double>>& regions,
                                  double start = 0) {
  std::vector<Laid> events;
  for (const auto& [name, op, duration] : regions) {
    events.push_back({"user_annotation", name, start, duration});
    if (!op.empty()) events.push_back({"cpu_op", op, start, duration});
    start += duration;
  }
  return events;
}

const KinetoCostSource& source_of(const KinetoCosts& costs, const std::string& cost) {
  for (const KinetoCostSource& s : costs.sources)
    if (s.cost == cost) return s;
  throw std::runtime_error("no source for " + cost);
}

std::string error_of(const std::vector<const KinetoSummary*>& ranks, const KinetoCostNames& names) {
  return test::error_text([&] { costs_from_kineto(ranks, names); });
}

TEST(KinetoCosts, MeansOfTheNamedRegionsWithBAsIPlusW) {
  const KinetoSummary s = summary_of({{"user_annotation", "forward", 0, 10}, {"user_annotation", "forward", 100, 14},
                                      {"user_annotation", "forward", 200, 12}, {"user_annotation", "backward", 20, 16},
                                      {"user_annotation", "weight", 40, 8}, {"user_annotation", "p2p", 50, 1}});
  const KinetoCosts costs = costs_from_kineto(s, KinetoCostNames{});
  EXPECT_DOUBLE_EQ(costs.costs.forward, 12);
  EXPECT_DOUBLE_EQ(costs.costs.backward, 24);
  EXPECT_DOUBLE_EQ(costs.costs.weight, 8);
  EXPECT_DOUBLE_EQ(costs.costs.comm, 1);
  EXPECT_FALSE(costs.costs.overlapped.has_value());
  EXPECT_TRUE(costs.warnings.empty());
  EXPECT_EQ(source_of(costs, "F").measure, "mean duration");
  EXPECT_EQ(source_of(costs, "F").occurrences, 3);
  EXPECT_EQ(source_of(costs, "B").measure, "B + W");
  EXPECT_EQ(cost_source_text(source_of(costs, "F")), "F = 12.000 us: mean duration (3 regions: forward)");

  KinetoCostNames no_split;
  no_split.weight = "";
  const KinetoCosts halved = costs_from_kineto(s, no_split);
  EXPECT_DOUBLE_EQ(halved.costs.backward, 16);
  EXPECT_DOUBLE_EQ(halved.costs.weight, 8);
  ASSERT_EQ(halved.warnings.size(), 1u);

  KinetoCostNames other;
  other.forward = "^fwd$";
  EXPECT_EQ(error_of({&s}, other), "no region matches --forward '^fwd$'; the trace's record_function regions: "
                                   "forward, backward, weight, p2p");
  other.forward = "(";
  EXPECT_NE(error_of({&s}, other).find("--forward '(' is not a regular expression"), std::string::npos);
  EXPECT_THROW(other.check(), InvalidArgument);
  EXPECT_NO_THROW(KinetoCostNames{}.check());
}

// One chunk pair of two MoE layers in DeepSeek's published order: each layer's forward computes 30 + 50 and
// exchanges 20 + 10, its backward's input part computes 70 + 60 and exchanges 10 + 20, its weight part 40 + 25.
std::vector<std::tuple<std::string, std::string, double>> deepseek_layer() {
  return {{"combine(B)", "c10d::alltoall_", 20}, {"attn(F)", "aten::mm", 30},     {"mlp(B)", "aten::mm", 70},
          {"dispatch(F)", "c10d::alltoall_", 20}, {"dispatch(B)", "c10d::alltoall_", 10}, {"mlp(W)", "aten::mm", 40},
          {"mlp(F)", "aten::mm", 50},             {"attn(B)", "aten::mm", 60},     {"attn(W)", "aten::mm", 25},
          {"combine(F)", "c10d::alltoall_", 10}};
}

TEST(KinetoCosts, PhasesSumPerChunkPair) {
  std::vector<std::tuple<std::string, std::string, double>> two_layers = deepseek_layer();
  for (const auto& phase : deepseek_layer()) two_layers.push_back(phase);
  std::vector<Laid> events = regions_in_turn(two_layers);
  events.insert(events.begin(), Laid{"user_annotation", "1F1B", 0, 670});
  const KinetoCosts costs = costs_from_kineto(summary_of(events), KinetoCostNames{});
  EXPECT_DOUBLE_EQ(costs.costs.forward, 2 * (30 + 50));
  EXPECT_DOUBLE_EQ(costs.costs.all_to_all, 2 * (20 + 10));
  EXPECT_DOUBLE_EQ(costs.costs.weight, 2 * (40 + 25));
  EXPECT_DOUBLE_EQ(costs.costs.backward, 2 * (70 + 60) + 2 * (40 + 25));
  ASSERT_TRUE(costs.costs.overlapped.has_value());
  EXPECT_DOUBLE_EQ(*costs.costs.overlapped, 670);
  EXPECT_TRUE(costs.warnings.empty());
  const KinetoCostSource& f = source_of(costs, "F");
  EXPECT_EQ(f.measure, "compute per chunk");
  EXPECT_EQ(f.regions, (std::vector<std::string>{"attn(F)", "dispatch(F)", "mlp(F)", "combine(F)"}));
  EXPECT_EQ(f.occurrences, 8);
  EXPECT_EQ(source_of(costs, "a2a").measure, "communication per chunk");
  EXPECT_EQ(source_of(costs, "B").measure, "B + W");

  // Without the pair region each phase is taken to run once per chunk: here, one layer's worth.
  const KinetoCosts per_layer = costs_from_kineto(summary_of(regions_in_turn(two_layers)), KinetoCostNames{});
  EXPECT_DOUBLE_EQ(per_layer.costs.forward, 30 + 50);
  EXPECT_DOUBLE_EQ(per_layer.costs.all_to_all, 20 + 10);
  ASSERT_EQ(per_layer.warnings.size(), 1u);
  EXPECT_NE(per_layer.warnings[0].find("each phase taken to run once per chunk (2 chunks)"), std::string::npos);
}

TEST(KinetoCosts, StagesNamedInRegionsGiveCostsPerStage) {
  const KinetoSummary s = summary_of(regions_in_turn({{"forward stage 0", "", 10},
                                                      {"forward stage 0", "", 14},
                                                      {"forward stage 1", "", 20},
                                                      {"backward_input stage 1", "", 30},
                                                      {"weight stage 1", "", 6},
                                                      {"backward stage 0", "", 24},
                                                      {"forward_backward stage 0", "", 50}}));
  const KinetoCosts costs = costs_from_kineto(s, KinetoCostNames{});
  EXPECT_EQ(costs.stages, 2);
  EXPECT_EQ(costs.costs.stage_forward, (std::vector<double>{12, 20}));
  // Stage 0 ran whole backwards (no W of its own: half of B, said once); stage 1 split its backward: B = I + W.
  EXPECT_EQ(costs.costs.stage_backward, (std::vector<double>{24, 36}));
  EXPECT_EQ(costs.costs.stage_weight, (std::vector<double>{12, 6}));
  EXPECT_DOUBLE_EQ(costs.costs.forward, 16);
  EXPECT_DOUBLE_EQ(*costs.costs.overlapped, 50);

  const KinetoSummary gap = summary_of(regions_in_turn({{"forward stage 0", "", 10}, {"backward stage 0", "", 20},
                                                        {"forward stage 2", "", 10}, {"backward stage 2", "", 20}}));
  EXPECT_EQ(error_of({&gap}, KinetoCostNames{}),
            "the regions name stages up to 2 but stage 1 has no forward region (--forward)");
  // Found by fuzz_kineto: forwards without a stage beside backwards with one read a backward of no region.
  const KinetoSummary mixed = summary_of(regions_in_turn({{"forward", "", 10}, {"backward stage 0", "", 20}}));
  EXPECT_EQ(error_of({&mixed}, KinetoCostNames{}), "the forward regions name no stage but the backward regions all "
                                                    "do (\" stage N\"): name the stages of both or of neither");
}

// A step adds its actions' times up, the slow occurrences too: the mean, 20 here, where the median would say 10.
TEST(KinetoCosts, AnActionsSlowOccurrencesCountInItsCost) {
  const KinetoSummary s = summary_of(regions_in_turn({{"forward", "", 10}, {"forward", "", 10}, {"forward", "", 40},
                                                      {"backward", "", 20}, {"forward_backward", "", 30},
                                                      {"forward_backward", "", 90}}));
  const KinetoCosts costs = costs_from_kineto(s, KinetoCostNames{});
  EXPECT_DOUBLE_EQ(costs.costs.forward, 20);
  EXPECT_DOUBLE_EQ(*costs.costs.overlapped, 60);
}

TEST(KinetoCosts, RanksAreReadTogether) {
  const KinetoSummary a = summary_of(regions_in_turn({{"forward", "", 10}, {"forward", "", 30}, {"backward", "", 40}}));
  const KinetoSummary b = summary_of(regions_in_turn({{"forward", "", 20}, {"backward", "", 60}}));
  const KinetoCosts costs = costs_from_kineto({&a, &b}, KinetoCostNames{});
  EXPECT_DOUBLE_EQ(costs.costs.forward, 20);  // the mean of 10, 30 and 20
  EXPECT_DOUBLE_EQ(costs.costs.backward, 50);
  EXPECT_EQ(source_of(costs, "F").occurrences, 3);
}

// gap: on each rank the gaps from one action's end to the next one's start inside a ProfilerStep (not across two,
// where the update runs), their lower quartile (nearest rank), and the median of the ranks'.
TEST(KinetoCosts, TheHostsGapIsTheLowerQuartileOfARanksGapsWithinItsSteps) {
  // Rank a, steps [0,100) and [100,200): gaps 2, 8, 4, 16, then 95 -> 100 crosses steps, then 1.
  // Sorted 1 2 4 8 16: the lower quartile is the second, 2.
  const KinetoSummary a = summary_of({{"user_annotation", "ProfilerStep#1", 0, 100},
                                      {"user_annotation", "ProfilerStep#2", 100, 100},
                                      {"user_annotation", "forward stage 0", 0, 10},
                                      {"user_annotation", "forward stage 0", 12, 10},
                                      {"user_annotation", "backward stage 0", 30, 20},
                                      {"user_annotation", "backward stage 0", 54, 20},
                                      {"user_annotation", "backward stage 0", 90, 5},
                                      {"user_annotation", "forward stage 0", 100, 10},
                                      {"user_annotation", "forward stage 0", 111, 10}});
  // Rank b, one step: gaps 5, 7, 3: the lower quartile of 3 5 7 is 3.
  const KinetoSummary b = summary_of({{"user_annotation", "ProfilerStep#1", 0, 100},
                                      {"user_annotation", "forward stage 1", 0, 10},
                                      {"user_annotation", "backward stage 1", 15, 20},
                                      {"user_annotation", "forward stage 1", 42, 10},
                                      {"user_annotation", "backward stage 1", 55, 20}});
  const KinetoCosts costs = costs_from_kineto({&a, &b}, KinetoCostNames{});
  EXPECT_DOUBLE_EQ(costs.costs.gap, 2.5);
  EXPECT_EQ(source_of(costs, "gap").measure, "lower quartile of a rank's gaps between its actions, median of the ranks");
  EXPECT_DOUBLE_EQ(costs_from_kineto(a, KinetoCostNames{}).costs.gap, 2);
}

// 1F1B over R = 2 ranks and M = 4 micro-batches at F = 10, B = 20 per stage takes (M + R - 1)(F + B) = 150.
TEST(KinetoRun, TheTracedScheduleIsSimulatedBesideTheMeasuredStep) {
  const Schedule ran = make_1f1b({2, 4});
  KinetoRanks ranks;
  for (int r = 0; r < 2; ++r) {
    KinetoRankSummary rank;
    rank.source = "rank" + std::to_string(r) + ".json";
    rank.rank = r;
    rank.schedule = format_text(ran);
    const std::string s = " stage " + std::to_string(r);
    rank.summary = summary_of(regions_in_turn({{"forward" + s, "", 10}, {"backward" + s, "", 20}}));
    rank.step = 160 + r;
    ranks.ranks.push_back(rank);
  }
  ranks.slowest = 1;
  const KinetoRun run = read_kineto_run(ranks, KinetoCostNames{});
  ASSERT_TRUE(run.schedule.has_value());
  EXPECT_EQ(run.schedule->num_microbatches, 4);
  EXPECT_DOUBLE_EQ(run.simulated_step, 150);
  EXPECT_DOUBLE_EQ(run.measured_step, 161);
  EXPECT_EQ(run.slowest_rank, 1);

  ranks.ranks[1].schedule = format_text(make_1f1b({2, 6}));
  try {
    read_kineto_run(ranks, KinetoCostNames{});
    FAIL() << "accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'rank0.json' and 'rank1.json' name different schedules"), std::string::npos);
  }
}

}  // namespace
}  // namespace dualpipe
