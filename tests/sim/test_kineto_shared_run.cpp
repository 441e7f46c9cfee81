// What `plan --from-kineto` reads beyond the actions' durations, from traces laid out by hand: a message's time
// from the waits for one, and ranks that shared a host's cores read as each action alone on a core, then simulated
// with the cores shared. The answers follow from the layouts.
#include <gtest/gtest.h>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/sim/kineto_plan.h"
#include "dualpipe/sim/shared_cores.h"
#include "sim/kineto_trace_text.h"

namespace dualpipe {
namespace {

struct Region {
  std::string name;
  double start, duration;
};

KinetoSummary summary_of(const std::vector<Region>& regions) {
  std::vector<std::string> texts;
  for (const Region& r : regions)
    texts.push_back(test::kineto_event("user_annotation", r.name, 1, 1, r.start, r.duration));
  return summarize_kineto(parse_kineto_trace(test::kineto_trace(texts), "laid.json"));
}

KinetoRanks ranks_of(const std::vector<std::vector<Region>>& per_rank, const std::string& schedule,
                     int host_cores = 0) {
  KinetoRanks ranks;
  for (std::size_t r = 0; r < per_rank.size(); ++r) {
    KinetoRankSummary rank;
    rank.source = "rank" + std::to_string(r) + ".json";
    rank.rank = static_cast<int>(r);
    rank.schedule = schedule;
    if (host_cores > 0) rank.host = "box", rank.host_cores = host_cores;
    rank.summary = summary_of(per_rank[r]);
    rank.step = 100;
    ranks.ranks.push_back(std::move(rank));
  }
  return ranks;
}

const KinetoCostSource* source_of(const KinetoCosts& costs, const std::string& cost) {
  for (const KinetoCostSource& s : costs.sources)
    if (s.cost == cost) return &s;
  return nullptr;
}

// 1F1B, R = 2, M = 2 (rank 0: F0 F1 B0 B1; rank 1: F0 B0 F1 B1), F = 10 and B = 20 on both stages.
//   Waits for a message, the consumer's rank idle: rank 1's F0 starts 2 after rank 0's F0 ended; rank 0's B0 3
//   after rank 1's B0 (rank 0 idle since 20), and its B1 7 after rank 1's B1 (idle since 65): comm = mean 4.
//   Gaps, every input there when the previous action ended: rank 0's F1 0; rank 1's B0 0, F1 1 (its input was
//   there at 20, long before rank 1's B0 ended at 42: no wait) and B1 0: gap = 0.25.
// Simulated at comm = 4, gap = 0.25: F0 0-10, F1 10.25-20.25 | F0 14-24, B0 24.25-44.25, F1 44.5-54.5,
// B1 54.75-74.75 | B0 48.25-68.25, B1 78.75-98.75.
TEST(KinetoRun, AMessagesTimeAndTheHostsGapAreReadFromTheWaitsOfTheScheduleThatRan) {
  std::vector<std::vector<Region>> laid = {{{"forward stage 0", 0, 10}, {"forward stage 0", 10, 10},
                                            {"backward stage 0", 45, 20}, {"backward stage 0", 80, 20}},
                                           {{"forward stage 1", 12, 10}, {"backward stage 1", 22, 20},
                                            {"forward stage 1", 43, 10}, {"backward stage 1", 53, 20}}};
  const std::string schedule = format_text(make_1f1b({2, 2}));
  const KinetoRun run = read_kineto_run(ranks_of(laid, schedule), KinetoCostNames{});
  EXPECT_DOUBLE_EQ(run.costs.costs.comm, 4);
  ASSERT_NE(source_of(run.costs, "comm"), nullptr);
  EXPECT_EQ(source_of(run.costs, "comm")->occurrences, 3);
  EXPECT_NE(source_of(run.costs, "comm")->measure.find("(3 waits in 1 step)"), std::string::npos);
  EXPECT_DOUBLE_EQ(run.costs.costs.gap, 0.25);
  EXPECT_NE(source_of(run.costs, "gap")->measure.find("(4 gaps in 1 step)"), std::string::npos);
  EXPECT_DOUBLE_EQ(run.simulated_step, 98.75);

  // Each rank's update after its own last action: rank 0's 5 after 98.75, rank 1's 30 after 74.75.
  laid[0].push_back({"update", 100, 5});
  laid[1].push_back({"update", 73, 30});
  const KinetoRun updated = read_kineto_run(ranks_of(laid, schedule), KinetoCostNames{});
  EXPECT_EQ(updated.costs.rank_updates, (std::vector<double>{5, 30}));
  EXPECT_DOUBLE_EQ(updated.costs.update, 5);
  EXPECT_DOUBLE_EQ(updated.simulated_step, 104.75);

  // Regions that are not the schedule's actions in its order say nothing about its messages, and the gap is the
  // lower quartile of the gaps (rank 0's 35, rank 1's 0: their median 17.5).
  const KinetoRanks other = ranks_of({{{"forward stage 0", 0, 10}, {"backward stage 0", 45, 20}},
                                      {{"forward stage 1", 12, 10}, {"backward stage 1", 22, 20}}},
                                     format_text(make_1f1b({2, 2})));
  const KinetoRun unmatched = read_kineto_run(other, KinetoCostNames{});
  EXPECT_EQ(source_of(unmatched.costs, "comm"), nullptr);
  EXPECT_DOUBLE_EQ(unmatched.costs.costs.gap, 17.5);
}

// The same run on one core: a message's wait counts only while the core was free, the rest being a wait for the
// core, which the simulation makes by sharing it. Rank 1's F0 waited [10, 12) while rank 0's F1 had the core: 0;
// rank 0's B0 waited [42, 45), rank 1's F1 taking the core from 43: 1; rank 0's B1 waited [73, 80) with the core
// free: 7. comm = 8 / 3.
TEST(KinetoRun, OnSharedCoresAMessagesWaitCountsWhileACoreWasFree) {
  const std::vector<std::vector<Region>> laid = {{{"forward stage 0", 0, 10}, {"forward stage 0", 10, 10},
                                                  {"backward stage 0", 45, 20}, {"backward stage 0", 80, 20}},
                                                 {{"forward stage 1", 12, 10}, {"backward stage 1", 22, 20},
                                                  {"forward stage 1", 43, 10}, {"backward stage 1", 53, 20}}};
  const KinetoRun run = read_kineto_run(ranks_of(laid, format_text(make_1f1b({2, 2})), 1), KinetoCostNames{});
  ASSERT_TRUE(run.shared_cores.has_value());
  EXPECT_DOUBLE_EQ(run.costs.costs.comm, 8.0 / 3);
  EXPECT_NE(source_of(run.costs, "comm")->measure.find("while a core was free (3 waits"), std::string::npos);
}

TEST(SharedCores, TheTimeWithACoreFreeIsWhereFewerRanksRanThanCores) {
  const std::map<double, int> level = {{0, 1}, {10, 3}, {20, 1}, {30, 0}};
  EXPECT_DOUBLE_EQ(time_with_a_free_core(level, 5, 25, 2), 10);  // [5, 10) and [20, 25)
  EXPECT_DOUBLE_EQ(time_with_a_free_core(level, 12, 18, 2), 0);
  EXPECT_DOUBLE_EQ(time_with_a_free_core(level, 12, 18, 3), 0);
  EXPECT_DOUBLE_EQ(time_with_a_free_core(level, 12, 18, 4), 6);
  EXPECT_DOUBLE_EQ(time_with_a_free_core(level, 25, 40, 1), 10);  // idle from 30
}

// Two ranks on one core: forwards [0,20) and [10,30) overlap in [10,20), where each ran at half speed, so each did
// 10 + 5 = 15 of work (20 and 20 measured, x4/3); the backwards ran alone (20 each). Costs per stage: F 15, B 20.
TEST(KinetoRun, RanksThatSharedCoresAreReadAsEachActionAlone) {
  const std::vector<std::vector<Region>> laid = {{{"forward stage 0", 0, 20}, {"backward stage 0", 60, 20}},
                                                 {{"forward stage 1", 10, 20}, {"backward stage 1", 35, 20}}};
  const KinetoRun shared = read_kineto_run(ranks_of(laid, "", 1), KinetoCostNames{});
  ASSERT_TRUE(shared.shared_cores.has_value());
  EXPECT_EQ(shared.shared_cores->cores, 1);
  EXPECT_EQ(shared.shared_cores->ranks, 2);
  EXPECT_EQ(shared.shared_cores->host, "box");
  EXPECT_DOUBLE_EQ(shared.shared_cores->measured_slowdown, 80.0 / 70.0);
  EXPECT_EQ(shared.costs.costs.stage_forward, (std::vector<double>{15, 15}));
  EXPECT_EQ(shared.costs.costs.stage_backward, (std::vector<double>{20, 20}));
  // The gap is the host's time between a rank's actions as they ran: 40 and 5, not stretched back.
  EXPECT_DOUBLE_EQ(shared.costs.costs.gap, 22.5);

  // As many cores as ranks, or no record of them: the durations as measured.
  for (int cores : {0, 2}) {
    const KinetoRun own = read_kineto_run(ranks_of(laid, "", cores), KinetoCostNames{});
    EXPECT_FALSE(own.shared_cores.has_value()) << cores;
    EXPECT_EQ(own.costs.costs.stage_forward, (std::vector<double>{20, 20})) << cores;
  }
}

// Data-parallel replicas share the cores too: PP2 x DP2, four processes on one core, 1F1B with one micro-batch, F
// = 10 and B = 20 of work a stage. Both replicas of a pipeline rank run each action at once, at half speed: F [0,20)
// on rank 0's replicas, [20,40) on rank 1's, then their B [40,80) and rank 0's B [80,120). Read as each action
// alone (x2) and simulated with the two replicas sharing the core, the step is the run's again; one pipeline alone
// on the core would take 60.
TEST(KinetoRun, DataParallelReplicasShareTheCoresInTheSimulation) {
  const std::vector<Region> rank0 = {{"forward stage 0", 0, 20}, {"backward stage 0", 80, 40}};
  const std::vector<Region> rank1 = {{"forward stage 1", 20, 20}, {"backward stage 1", 40, 40}};
  const KinetoRun run =
      read_kineto_run(ranks_of({rank0, rank1, rank0, rank1}, format_text(make_1f1b({2, 1})), 1), KinetoCostNames{});
  ASSERT_TRUE(run.shared_cores.has_value());
  EXPECT_EQ(run.shared_cores->ranks, 4);
  EXPECT_DOUBLE_EQ(run.shared_cores->measured_slowdown, 2);
  EXPECT_EQ(run.costs.costs.stage_forward, (std::vector<double>{10, 10}));
  EXPECT_EQ(run.costs.costs.stage_backward, (std::vector<double>{20, 20}));
  // The gaps and waits read on each replica's pipeline apart: rank 1's B followed its F at once.
  EXPECT_DOUBLE_EQ(run.costs.costs.gap, 0);
  EXPECT_NE(source_of(run.costs, "gap")->measure.find("(2 gaps in 2 steps of 2 replicas' pipelines)"),
            std::string::npos) << source_of(run.costs, "gap")->measure;
  EXPECT_NEAR(run.shared_cores->simulated_slowdown, 2, 1e-3);
  EXPECT_NEAR(run.simulated_step, 120, 0.01);
  const auto says_left_out = [](const KinetoRun& r) {
    for (const std::string& w : r.costs.warnings)
      if (w.find("data-parallel collectives ran outside") != std::string::npos) return w;
    return std::string();
  };
  EXPECT_EQ(says_left_out(run), "");

  // A reduction of rank 2 (replica 1's rank 0) after its last action is in no action, and the plan says so (one
  // inside an action is in it already). It is added to that trace's update, and each pipeline rank takes the least
  // of its replicas': rank 0's, without one, is none, and the step stays 120.
  KinetoRanks reducing = ranks_of({rank0, rank1, rank0, rank1}, format_text(make_1f1b({2, 1})), 1);
  reducing.ranks[2].collectives = {{"gloo:all_reduce", 85, 90}, {"gloo:reduce", 120, 126}};
  const KinetoRun reduced = read_kineto_run(reducing, KinetoCostNames{});
  const std::string note = says_left_out(reduced);
  EXPECT_NE(note.find("(gloo:reduce): up to 0.006 ms a step, on rank 2; the traced schedule holds the pipeline's "
                      "actions only, so the plan adds each rank's to its update"),
            std::string::npos) << note;
  EXPECT_NEAR(reduced.simulated_step, 120, 0.01);
  // Rank 0 reducing too, for 4: pipeline rank 0 updates for 4 after its last action, on both replicas at once,
  // which share the one core (the other two ranks done): 8 more.
  reducing.ranks[0].collectives = {{"gloo:reduce", 120, 124}};
  EXPECT_NEAR(read_kineto_run(reducing, KinetoCostNames{}).simulated_step, 128, 0.01);
}

// 1F1B, R = 2, M = 1, F = 10 and B = 20 a stage, two replicas, a core each (no host recorded): F0 0-10, F1 10-20,
// B1 20-40, B0 40-60. Pipeline rank 1 (the last stage, the output layer's) updates for 30 and 34 on its two replicas,
// rank 0 for 5 and 8: each pipeline rank takes the least of its own replicas', rank 1's update ending the step at
// 40 + 30 = 70 (the least of every trace's, 5, would end it at 65).
TEST(KinetoRun, WithReplicasEachPipelineRankTakesTheLeastUpdateOfItsReplicas) {
  const auto rank0 = [](double update) {
    return std::vector<Region>{{"forward stage 0", 0, 10}, {"backward stage 0", 40, 20}, {"update", 60, update}};
  };
  const auto rank1 = [](double update) {
    return std::vector<Region>{{"forward stage 1", 10, 10}, {"backward stage 1", 20, 20}, {"update", 40, update}};
  };
  const KinetoRun run = read_kineto_run(ranks_of({rank0(5), rank1(30), rank0(8), rank1(34)},
                                                 format_text(make_1f1b({2, 1}))),
                                        KinetoCostNames{});
  EXPECT_FALSE(run.shared_cores.has_value());
  EXPECT_EQ(run.costs.rank_updates, (std::vector<double>{5, 30, 8, 34}));
  EXPECT_DOUBLE_EQ(run.simulated_pipeline, 60);
  EXPECT_DOUBLE_EQ(run.simulated_step, 70);
}

// 1F1B, R = 2, M = 1, F = 10 and B = 20 a stage, an update of 10, one core: F0 0-10 and 10-20, rank 1's B 20-40
// alone; then rank 0's B and rank 1's update share the core from 40, each at half speed: the update's 10 is done at
// 60 and B's 20 at 70 (10 at half speed, 10 alone), and rank 0's update runs alone 70-80.
TEST(SharedCores, EachRanksUpdateSharesTheCoresAfterItsLastAction) {
  CostModel costs;
  costs.forward = 10, costs.backward = 20;
  const SharedCoresStep step = simulate_on_shared_cores(make_1f1b({2, 1}), costs, 1, 1, {10, 10});
  EXPECT_NEAR(step.makespan, 70, 0.01);
  EXPECT_NEAR(step.step, 80, 0.01);
  // Compute: 10 + 10 + 20 + 30 + 20 + 10 = 100 slowed, 80 of work.
  EXPECT_NEAR(step.mean_slowdown, 100.0 / 80.0, 1e-3);
  // Two cores for two ranks: nothing shared, the update after the pipeline's 60.
  const SharedCoresStep own = simulate_on_shared_cores(make_1f1b({2, 1}), costs, 1, 2, {10, 10});
  EXPECT_DOUBLE_EQ(own.makespan, 60);
  EXPECT_DOUBLE_EQ(own.step, 70);
}

}  // namespace
}  // namespace dualpipe
