// The data-parallel lowering passes (data_parallel_lowering.h), their text form, their checks in the validator, and
// their timing in the simulator. Checked against hand-derived orders and step times for small cases, and, for every
// generator, against the rules written out here: one UNSHARD, RESHARD and REDUCE_GRAD per stage a rank holds, the
// UNSHARD ahead of the stage's first compute action by at most one compute action, the RESHARD right after its
// last, the REDUCE_GRAD right after the last action that adds to its gradients.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "dualpipe/schedule/data_parallel_lowering.h"
#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/lower.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/schedule/validate.h"
#include "dualpipe/sim/simulate.h"
#include "test_helpers.h"

namespace dualpipe {
namespace {

using test::contains;
using test::join;

TEST(DataParallelLowering, OneFOneBTwoRanksByHand) {
  // 1F1B R=2 M=2: rank r runs rF0 rF1 rB0 rB1 on stage r alone (as rank 0 does; rank 1 alternates). Its only stage
  // is first used by the first compute action, so the UNSHARD comes before it; the last backward is the last use.
  const Schedule s = make_1f1b(ScheduleOptions{2, 2});
  const Schedule zero3 = add_unshard_reshard(s);
  EXPECT_EQ(join(zero3.actions[0]), "0UNSHARD 0F0 0F1 0B0 0B1 0RESHARD");
  EXPECT_EQ(join(zero3.actions[1]), "1UNSHARD 1F0 1B0 1F1 1B1 1RESHARD");
  EXPECT_EQ(join(add_reduce_grad(zero3, ReduceAt::LastGradient).actions[1]),
            "1UNSHARD 1F0 1B0 1F1 1B1 1REDUCE_GRAD 1RESHARD");
  EXPECT_EQ(join(add_reduce_grad(zero3, ReduceAt::StepEnd).actions[1]),
            "1UNSHARD 1F0 1B0 1F1 1B1 1RESHARD 1REDUCE_GRAD");
  // Every ZeRO stage reduces where the last gradient is done (ZeRO-2 and 3 onto the owners), unless told not to.
  EXPECT_EQ(join(add_data_parallel_actions(s, 2, zero_stage(3)).actions[0]),
            "0UNSHARD 0F0 0F1 0B0 0B1 0REDUCE_GRAD 0RESHARD");
  EXPECT_EQ(join(add_data_parallel_actions(s, 2, zero_stage(3), /*overlap_reduction=*/false).actions[0]),
            "0UNSHARD 0F0 0F1 0B0 0B1 0RESHARD 0REDUCE_GRAD");
  EXPECT_EQ(join(add_data_parallel_actions(s, 2, zero_stage(1)).actions[0]), "0F0 0F1 0B0 0B1 0REDUCE_GRAD");
  EXPECT_EQ(join(add_data_parallel_actions(s, 2, zero_stage(0), /*overlap_reduction=*/false).actions[0]),
            "0F0 0F1 0B0 0B1 0REDUCE_GRAD");
  EXPECT_EQ(format_text(add_data_parallel_actions(s, 1, zero_stage(0))), format_text(s));
}

TEST(DataParallelLowering, TheVsSecondStageIsGatheredOneComputeActionAhead) {
  // DualPipeV R=2 M=4, rank 0 holds stages 0 and 3: 0F0 0F1 0F2 3F0 ... Stage 3 is first used by 3F0, the fourth
  // compute action, so its UNSHARD goes before the third, 0F2, and the gather runs while 0F2 computes. Stage 3's
  // last use is 3B3 (a pair's backward half counts: (0F3;3B1), (3F3;0B1)), stage 0's the last W.
  const Schedule s = make_schedule("dualpipev", {2, 4});
  const std::string rank0 = join(add_unshard_reshard(s).actions[0]);
  EXPECT_TRUE(contains(rank0, "0UNSHARD 0F0 0F1 3UNSHARD 0F2 3F0 ")) << rank0;
  EXPECT_TRUE(contains(rank0, " 3B3 3RESHARD ")) << rank0;
  EXPECT_EQ(rank0.substr(rank0.size() - 12), "0W3 0RESHARD") << rank0;
  // ZeRO-2 reduces stage 3 onto its owners while stage 0 still computes: right after 3B3, its last gradient.
  const std::string zero2 = join(add_data_parallel_actions(s, 2, zero_stage(2)).actions[0]);
  EXPECT_TRUE(contains(zero2, " 3B3 3REDUCE_GRAD 0I2 ")) << zero2;
  EXPECT_EQ(zero2.substr(zero2.size() - 16), "0W3 0REDUCE_GRAD") << zero2;
}

// The rules of the top of this file, counted here without the validator.
void expect_rules_hold(const Schedule& compute, const Schedule& lowered, ReduceAt at, const std::string& what) {
  for (int r = 0; r < compute.num_ranks; ++r) {
    const auto& actions = lowered.actions[r];
    std::map<int, std::vector<int>> uses, gradients;  // stage -> compute positions in `actions`
    std::map<std::pair<int, ActionType>, std::vector<int>> at_position;
    for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
      const Action& a = actions[i];
      if (a.is_data_parallel()) {
        at_position[{a.stage, a.type}].push_back(i);
        continue;
      }
      uses[a.stage].push_back(i);
      if (a.type == ActionType::Overlapped) uses[a.bwd_stage].push_back(i), gradients[a.bwd_stage].push_back(i);
      else if (a.type != ActionType::Forward) gradients[a.stage].push_back(i);
    }
    for (const auto& [stage, positions] : uses) {
      const std::string where = what + " rank " + std::to_string(r) + " stage " + std::to_string(stage);
      const auto& unshard = at_position[{stage, ActionType::Unshard}];
      const auto& reshard = at_position[{stage, ActionType::Reshard}];
      const auto& reduce = at_position[{stage, ActionType::ReduceGrad}];
      ASSERT_EQ(unshard.size(), 1u) << where;
      ASSERT_EQ(reshard.size(), 1u) << where;
      ASSERT_EQ(reduce.size(), 1u) << where;
      int computes_between = 0;  // compute actions from the UNSHARD to the first use
      for (int i = unshard[0]; i < positions.front(); ++i) computes_between += actions[i].is_compute();
      EXPECT_LE(computes_between, 1) << where;
      EXPECT_GT(positions.front(), unshard[0]) << where;
      EXPECT_GT(reshard[0], positions.back()) << where;
      for (int i = positions.back() + 1; i < reshard[0]; ++i) EXPECT_TRUE(actions[i].is_data_parallel()) << where;
      EXPECT_GT(reduce[0], gradients[stage].back()) << where;
      if (at == ReduceAt::LastGradient) {
        for (int i = gradients[stage].back() + 1; i < reduce[0]; ++i)
          EXPECT_TRUE(actions[i].is_data_parallel()) << where;
      } else {
        for (int i = reduce[0]; i < static_cast<int>(actions.size()); ++i)
          EXPECT_FALSE(actions[i].is_compute()) << where;
      }
    }
  }
}

TEST(DataParallelLowering, EveryGeneratorsLoweredScheduleKeepsTheRulesAndValidates) {
  for (const GeneratorInfo& g : generators()) {
    const int R = 4, M = 8;
    const Schedule s = make_schedule(std::string(g.name), {R, M});
    for (const ReduceAt at : {ReduceAt::LastGradient, ReduceAt::StepEnd}) {
      const Schedule lowered = add_reduce_grad(add_unshard_reshard(s), at);
      const std::string what = std::string(g.name) + (at == ReduceAt::StepEnd ? " (step end)" : "");
      expect_rules_hold(s, lowered, at, what);
      EXPECT_EQ(find_problems(lowered), std::vector<std::string>{}) << what;
      // The communication lowering keeps them where they are, and its result validates too.
      const Schedule with_messages = lower_communication(lowered);
      EXPECT_EQ(find_problems(with_messages), std::vector<std::string>{}) << what;
      // And the text form reads back as the same schedule.
      EXPECT_EQ(format_text(parse_text(format_text(lowered))), format_text(lowered)) << what;
    }
  }
}

TEST(DataParallelLowering, ActionsReadAndPrintAsPyTorchWritesThem) {
  for (const char* text : {"0UNSHARD", "3RESHARD", "12REDUCE_GRAD"}) {
    const Action a = parse_action(text);
    EXPECT_TRUE(a.is_data_parallel()) << text;
    EXPECT_FALSE(a.is_compute() || a.is_communication()) << text;
    EXPECT_EQ(to_string(a), text);
  }
  EXPECT_TRUE(contains(test::error_message([] { parse_action("0UNSHARD3"); }),
                       "UNSHARD belongs to a stage, not a micro-batch: write 0UNSHARD"));
}

TEST(DataParallelLowering, PassesRefuseWhatTheyCannotServe) {
  const Schedule s = make_1f1b(ScheduleOptions{2, 2});
  EXPECT_TRUE(contains(test::error_message([&] { add_unshard_reshard(add_unshard_reshard(s)); }),
                       "holds 0UNSHARD"));
  EXPECT_TRUE(contains(test::error_message([&] { add_data_parallel_actions(s, 1, zero_stage(3)); }),
                       "ZeRO-3 shards over the data-parallel replicas and needs at least 2, got 1"));
  EXPECT_TRUE(contains(test::error_message([&] { add_data_parallel_actions(s, 2, zero_stage(4)); }),
                       "the ZeRO stage must be 0, 1, 2 or 3, got 4"));
  EXPECT_TRUE(contains(test::error_message([&] { add_data_parallel_actions(s, 0, zero_stage(0)); }),
                       "data-parallel replicas must be at least 1, got 0"));
}

TEST(DataParallelLowering, TheValidatorNamesMisplacedActions) {
  const auto problems = [](const std::string& rank0, const std::string& rank1) {
    return test::join_lines(find_problems(parse_text("rank 0: " + rank0 + "\nrank 1: " + rank1 + "\n")));
  };
  const std::string rank1 = "1F0 1B0 1F1 1B1";
  EXPECT_EQ(problems("0UNSHARD 0F0 0F1 0B0 0B1 0RESHARD 0REDUCE_GRAD", "1UNSHARD " + rank1 + " 1RESHARD 1REDUCE_GRAD"),
            "");
  EXPECT_TRUE(contains(problems("0F0 0UNSHARD 0F1 0B0 0B1", rank1),
                       "rank 0 position 1: 0UNSHARD comes after the stage's first compute action 0F0 at position 0"));
  EXPECT_TRUE(contains(problems("0F0 0F1 0B0 0RESHARD 0B1", rank1),
                       "rank 0 position 3: 0RESHARD comes before the stage's last compute action 0B1 at position 4"));
  EXPECT_TRUE(contains(problems("0F0 0F1 0B0 0REDUCE_GRAD 0B1", rank1),
                       "0REDUCE_GRAD comes before 0B1 at position 4, which still adds to the stage's gradients"));
  EXPECT_TRUE(contains(problems("0F0 0F1 0B0 0B1 0REDUCE_GRAD 0REDUCE_GRAD", rank1),
                       "rank 0 position 5: 0REDUCE_GRAD again"));
  EXPECT_TRUE(contains(problems("0F0 0F1 0B0 0B1 1REDUCE_GRAD", rank1),
                       "1REDUCE_GRAD names stage 1, which rank 0 does not hold"));
  EXPECT_TRUE(contains(problems("0F0 0F1 0B0 0B1 0RESHARD 0UNSHARD", rank1), "0RESHARD comes before its 0UNSHARD"));
  // Issue 75's round four: a RESHARD of nothing gathered and an UNSHARD never dropped passed, and so did a stage
  // whose replicas reduce while another stage's do not (its replicas drift apart).
  EXPECT_TRUE(contains(problems("0F0 0F1 0B0 0B1 0RESHARD", "1F0 1B0 1F1 1B1 1RESHARD"),
                       "rank 0 position 4: 0RESHARD has no 0UNSHARD on rank 0: it drops parameters that were never "
                       "gathered"));
  EXPECT_TRUE(contains(problems("0UNSHARD 0F0 0F1 0B0 0B1", "1UNSHARD 1F0 1B0 1F1 1B1 1RESHARD"),
                       "rank 0 position 0: 0UNSHARD has no 0RESHARD on rank 0: the gathered parameters are never "
                       "dropped"));
  EXPECT_EQ(problems("0F0 0F1 0B0 0B1 0REDUCE_GRAD", rank1),
            "rank 1 adds gradients to stage 1 (1B0 at position 1) without a 1REDUCE_GRAD, though the schedule has "
            "0REDUCE_GRAD on rank 0: every stage's replicas take part, or none\n");
  EXPECT_TRUE(contains(problems("0UNSHARD 0F0 0F1 0B0 0B1 0RESHARD", rank1),
                       "rank 1 computes stage 1 (1F0 at position 0) without a 1UNSHARD, though the schedule has "
                       "0UNSHARD on rank 0"));
}

// 1F1B R=2 M=2 with F=1, B=2 (spec section 2's engine, by hand): rank 0 runs 0F0 [0,1] 0F1 [1,2]; rank 1 1F0 [1,2]
// 1B0 [2,4] 1F1 [4,5] 1B1 [5,7]; rank 0 0B0 [4,6] 0B1 [7,9]. Makespan 9.
TEST(DataParallelLowering, TheSimulatorTimesThemOnTheRanksLink) {
  const Schedule s = make_1f1b(ScheduleOptions{2, 2});
  CostModel costs = CostModel::parse("F=1,B=2,W=1,unshard=1.5,reduce=2");
  EXPECT_DOUBLE_EQ(simulate(s, costs).metrics.makespan, 9);
  // ZeRO-3: each rank gathers its stage for 1.5 first, so everything starts 1.5 later (rank 1's 1F0 waits for 0F0,
  // which ends at 2.5, and its own gather is done at 1.5); the reductions come after the last backwards, 0B1 ending
  // at 10.5: 10.5 + 2 = 12.5.
  const Simulation zero3 = simulate(add_data_parallel_actions(s, 2, zero_stage(3)), costs);
  EXPECT_DOUBLE_EQ(zero3.metrics.makespan, 12.5);
  EXPECT_DOUBLE_EQ(zero3.metrics.per_rank[0].busy, 6);  // compute only
  EXPECT_DOUBLE_EQ(zero3.metrics.per_rank[0].span, 12.5);
  // Data parallelism alone: rank 1 reduces [7,9] while rank 0 still computes; rank 0 [9,11].
  EXPECT_DOUBLE_EQ(simulate(add_data_parallel_actions(s, 2, zero_stage(0)), costs).metrics.makespan, 11);
  // Free collectives change nothing.
  costs.unshard = costs.reduce = 0;
  EXPECT_DOUBLE_EQ(simulate(add_data_parallel_actions(s, 2, zero_stage(3)), costs).metrics.makespan, 9);
}

TEST(DataParallelLowering, AReductionOverlapsTheComputeAfterIt) {
  // DualPipeV R=2 M=4 (F=1, B=2, W=1): on rank 1 stage 2's last gradient (its W) comes before stage 1's; a
  // reduction of 0.5 per stage issued there runs on the link beside the remaining compute, so only the last one
  // adds to the step: the makespan grows by exactly one reduction.
  const Schedule s = make_schedule("dualpipev", {2, 4});
  const CostModel costs = CostModel::parse("F=1,B=2,W=1,reduce=0.5");
  const double plain = simulate(s, costs).metrics.makespan;
  const Schedule reduced = add_data_parallel_actions(s, 2, zero_stage(0));
  const Simulation sim = simulate(reduced, costs);
  EXPECT_DOUBLE_EQ(sim.metrics.makespan, plain + 0.5);
  // The first REDUCE_GRAD of each rank ends before the rank's last compute action does.
  for (int r = 0; r < 2; ++r) {
    double first_reduce_end = -1, last_compute_end = 0;
    for (std::size_t i = 0; i < reduced.actions[r].size(); ++i) {
      const Action& a = reduced.actions[r][i];
      if (a.is_compute()) last_compute_end = sim.timeline[r][i].end;
      if (a.type == ActionType::ReduceGrad && first_reduce_end < 0) first_reduce_end = sim.timeline[r][i].end;
    }
    EXPECT_LT(first_reduce_end, last_compute_end) << "rank " << r;
  }
}

}  // namespace
}  // namespace dualpipe
