// split_overlapped_pairs (split_pairs.h): each (F;B) made F then B. Checked against a hand-derived lowered text,
// against the validator, and against the simulator: taking a pair apart only removes waits (the forward no longer
// waits for the backward's gradient, the next rank no longer waits for the backward to get the forward's output),
// so no action starts later, and with a message latency the step is shorter.
#include <gtest/gtest.h>

#include <string>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/lower.h"
#include "dualpipe/schedule/split_pairs.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/schedule/validate.h"
#include "dualpipe/sim/simulate.h"
#include "test_helpers.h"

namespace dualpipe {
namespace {

TEST(SplitPairs, DualPipeTwoRanksByHand) {
  // As Lower.DualPipeTwoRanksByHand, whose one pair per rank, (1F3;0B0) on rank 0, received 1F3's input and 0B0's
  // gradient before it. Apart: 1F3 (the last stage's forward, which sends nothing) runs once its input is there,
  // and 0B0's gradient is waited for after it.
  const Schedule lowered = lower_communication(split_overlapped_pairs(make_dualpipe(ScheduleOptions{2, 4})));
  EXPECT_EQ(format_text(lowered),
            "rank 0: 0F0 0SEND_F0 1RECV_F2 1F2 0F1 0SEND_F1 1B2 1SEND_B2 1RECV_F3 1F3 0RECV_B0 0B0 1B3 "
            "1SEND_B3 0RECV_B1 0I1 0W1\n"
            "rank 1: 0F2 0SEND_F2 1RECV_F0 1F0 0F3 0SEND_F3 1B0 1SEND_B0 1RECV_F1 1F1 0RECV_B2 0B2 1B1 "
            "1SEND_B1 0RECV_B3 0I3 0W3\n");
}

TEST(SplitPairs, KeepsEveryOtherActionAndTheComputeOrder) {
  for (const char* kind : {"dualpipe", "dualpipev", "1f1b", "zb-h1"}) {
    const Schedule s = make_schedule(kind, ScheduleOptions{4, 10});
    const Schedule split = split_overlapped_pairs(s);
    EXPECT_TRUE(find_problems(split).empty()) << kind;
    EXPECT_TRUE(find_problems(lower_communication(split)).empty()) << kind;
    for (int r = 0; r < s.num_ranks; ++r) {
      std::vector<Action> expected;
      for (const Action& a : s.actions[r]) {
        if (a.type == ActionType::Overlapped) {
          expected.push_back(Action::forward(a.stage, a.microbatch));
          expected.push_back(Action::backward(a.bwd_stage, a.bwd_microbatch));
        } else {
          expected.push_back(a);
        }
      }
      EXPECT_EQ(split.actions[r], expected) << kind << " rank " << r;
    }
  }
}

TEST(SplitPairs, NoActionStartsLaterAndALatencyMakesTheStepShorter) {
  // A pair that does not overlap costs F + B either way (CostModel::overlapped unset).
  for (const char* kind : {"dualpipe", "dualpipev"}) {
    for (int ranks : {2, 4, 8}) {
      const Schedule s = make_schedule(kind, ScheduleOptions{ranks, 2 * ranks + 4});
      const Schedule split = split_overlapped_pairs(s);
      for (double comm : {0.0, 0.1, 0.5}) {
        CostModel costs;
        costs.comm = comm;
        const Simulation paired = simulate(s, costs), apart = simulate(split, costs);
        for (int r = 0; r < s.num_ranks; ++r) {
          std::size_t j = 0;
          for (std::size_t i = 0; i < s.actions[r].size(); ++i, ++j) {
            EXPECT_LE(apart.timeline[r][j].start, paired.timeline[r][i].start + 1e-12) << kind << " rank " << r;
            if (s.actions[r][i].type == ActionType::Overlapped) ++j;  // the pair's backward, ending with it
            EXPECT_LE(apart.timeline[r][j].end, paired.timeline[r][i].end + 1e-12) << kind << " rank " << r;
          }
        }
        if (comm > 0) {
          EXPECT_LT(apart.metrics.makespan, paired.metrics.makespan) << kind << " R=" << ranks << " comm " << comm;
        } else {
          EXPECT_LE(apart.metrics.makespan, paired.metrics.makespan) << kind << " R=" << ranks;
        }
      }
    }
  }
}

TEST(SplitPairs, RefusesALoweredSchedule) {
  const Schedule lowered = lower_communication(make_dualpipev(ScheduleOptions{2, 4}));
  const std::string m = test::error_message([&] { split_overlapped_pairs(lowered); });
  EXPECT_TRUE(test::contains(m, "compute-only")) << m;
}

}  // namespace
}  // namespace dualpipe
