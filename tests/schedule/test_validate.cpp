// The validator on deliberately broken schedules. Each case is built by hand (small texts) or by one
// mutation of a generated schedule, and the problem message must name the rank and the action.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/lower.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/schedule/validate.h"
#include "dualpipe/sim/simulate.h"
#include "test_helpers.h"

namespace dualpipe {
namespace {

using test::contains;

// The one problem among `problems` that contains `key`; fails when there is none.
std::string problem_with(const std::vector<std::string>& problems, const std::string& key) {
  for (const std::string& p : problems) {
    if (contains(p, key)) return p;
  }
  ADD_FAILURE() << "no problem mentions '" << key << "'; problems:\n" << test::join_lines(problems);
  return "";
}

// The problem that contains `key` names every one of `details` too (the rank, the position, the actions).
void expect_problem(const std::vector<std::string>& problems, const std::string& key,
                    const std::vector<std::string>& details) {
  test::expect_contains_all(problem_with(problems, key), details);
}

// Takes `action` out of the rank's list; the mutation tests below start from a schedule that holds it.
void remove_action(Schedule& s, int rank, const Action& action) {
  auto& actions = s.actions[rank];
  const auto it = std::find(actions.begin(), actions.end(), action);
  ASSERT_NE(it, actions.end()) << to_string(action) << " is not on rank " << rank;
  actions.erase(it);
}

// A fresh 2-rank, 2-stage, 2-micro-batch schedule with the linear placement (stage s on rank s).
Schedule two_by_two(const char* text) {
  Schedule s = parse_text(text);
  EXPECT_EQ(s.num_stages, 2);
  return s;
}

// 1F1B R=2 M=2 (spec section 6): rank 0 warms up with one forward.
constexpr const char* k1F1B =
    "rank 0: 0F0 0F1 0B0 0B1\n"
    "rank 1: 1F0 1B0 1F1 1B1\n";

TEST(Validate, GeneratedAndHandWrittenValidSchedulesHaveNoProblems) {
  EXPECT_TRUE(find_problems(parse_text(k1F1B)).empty());
  EXPECT_NO_THROW(validate(parse_text(k1F1B)));
  EXPECT_TRUE(find_problems(make_dualpipe(ScheduleOptions{4, 8})).empty());
}

TEST(Validate, MissingAction) {
  // 1F1B with rank 1's 1B1 dropped. Parsed counts stay S=2, M=2.
  const auto problems = find_problems(two_by_two("rank 0: 0F0 0F1 0B0 0B1\nrank 1: 1F0 1B0 1F1\n"));
  expect_problem(problems, "missing action 1B1", {"rank 1"});
  expect_problem(problems, "counts do not add up", {"found 4 forwards and 3 backwards"});
}

TEST(Validate, MissingForward) {
  Schedule s = make_1f1b(ScheduleOptions{3, 4});
  remove_action(s, 1, Action::forward(1, 2));
  const auto problems = find_problems(s);
  expect_problem(problems, "missing action 1F2", {"rank 1"});
  expect_problem(problems, "counts do not add up", {"3 x 4 = 12", "found 11 forwards and 12 backwards"});
}

TEST(Validate, DuplicatedAction) {
  const auto problems = find_problems(two_by_two("rank 0: 0F0 0F1 0B0 0F1 0B1\nrank 1: 1F0 1B0 1F1 1B1\n"));
  expect_problem(problems, "duplicated action 0F1", {"rank 0 position 1", "rank 0 position 3"});
}

TEST(Validate, DuplicatedHalfOfAPair) {
  // 1F1 both alone and as the forward half of a pair.
  const auto problems =
      find_problems(two_by_two("rank 0: 0F0 0F1 0B0 0B1\nrank 1: 1F0 1F1 (1F1;1B0) 1B1\n"));
  expect_problem(problems, "duplicated action 1F1", {"rank 1 position 1", "rank 1 position 2"});
}

TEST(Validate, BackwardBeforeItsForwardOnTheSameRank) {
  // Rank 1 runs 1B0 before 1F0.
  const auto problems = find_problems(two_by_two("rank 0: 0F0 0F1 0B0 0B1\nrank 1: 1B0 1F0 1F1 1B1\n"));
  expect_problem(problems, "before its forward", {"rank 1 position 0", "1B0", "1F0"});
}

TEST(Validate, WeightBeforeItsInput) {
  const auto problems = find_problems(two_by_two("rank 0: 0F0 0F1 0B0 0B1\nrank 1: 1F0 1W0 1I0 1F1 1B1\n"));
  expect_problem(problems, "1W0 runs before its 1I0", {"rank 1 position 1"});
}

TEST(Validate, WeightWithoutItsInput) {
  // ZB-H1 with one I turned into a full B while its W stays.
  Schedule s = make_zb_h1(ScheduleOptions{2, 3});
  auto& r0 = s.actions[0];
  *std::find(r0.begin(), r0.end(), Action::backward_input(0, 1)) = Action::backward(0, 1);
  expect_problem(find_problems(s), "W without its I", {"0W1", "rank 0"});
}

TEST(Validate, InputWithoutItsWeight) {
  Schedule s = make_zb_h1(ScheduleOptions{2, 3});
  remove_action(s, 1, Action::backward_weight(1, 2));
  expect_problem(find_problems(s), "missing action 1W2", {"1I2", "rank 1"});
}

TEST(Validate, BothFullAndSplitBackward) {
  // 0B0 and 0I0 (+0W0) for the same stage and micro-batch.
  const auto problems =
      find_problems(two_by_two("rank 0: 0F0 0F1 0B0 0I0 0W0 0B1\nrank 1: 1F0 1B0 1F1 1B1\n"));
  expect_problem(problems, "both 0B0", {"0I0", "rank 0 position 2", "rank 0 position 3"});
  problem_with(problems, "found 4 forwards and 5 backwards");
}

TEST(Validate, CountsThatDoNotAddUp) {
  // The schedule declares 3 micro-batches but runs only 2.
  Schedule s = parse_text(k1F1B);
  s.num_microbatches = 3;
  s.placement = Placement::linear(2);
  const auto problems = find_problems(s);
  expect_problem(problems, "counts do not add up", {"2 x 3 = 6", "found 4 forwards and 4 backwards"});
  problem_with(problems, "missing action 0F2 (expected on rank 0)");
  problem_with(problems, "missing action 1F2 (expected on rank 1)");
}

TEST(Validate, PlacementMismatch) {
  // 1F1B R=2 M=2 with 1F1 moved from rank 1 to rank 0 (the placement still says stage 1 is on rank 1).
  Schedule s = parse_text(k1F1B);
  remove_action(s, 1, Action::forward(1, 1));
  s.actions[0].push_back(Action::forward(1, 1));
  expect_problem(find_problems(s), "placement mismatch", {"rank 0 position 4", "1F1", "on rank 1"});
}

TEST(Validate, PlacementMismatchInATwoDirectionSchedule) {
  // DualPipe R=2 M=4: micro-batch 2 belongs to direction 1, so its stage 0 runs on rank 1. Swapping the
  // ranks' whole orders puts every action on the wrong replica.
  Schedule s = make_dualpipe(ScheduleOptions{2, 4});
  std::swap(s.actions[0], s.actions[1]);
  expect_problem(find_problems(s), "placement mismatch: rank 0 position 0 runs 0F2", {"on rank 1"});
}

TEST(Validate, CrossRankDeadlock) {
  // 1F1B R=2 M=2 with one swap on each rank: rank 0 runs 0B0 before 0F1, rank 1 runs 1F1 before 1B0.
  // Rank 0 waits at 0B0 for 1B0; rank 1 reaches 1F1 first and waits for 0F1, which rank 0 only runs after
  // 0B0: each waits on the other.
  const Schedule s = parse_text("rank 0: 0F0 0B0 0F1 0B1\nrank 1: 1F0 1F1 1B0 1B1\n");
  const auto problems = find_problems(s);
  ASSERT_EQ(problems.size(), 2u) << test::join_lines(problems);
  expect_problem(problems, "rank 0", {"deadlock", "0B0", "1B0"});  // 1B0: what it waits for
  expect_problem(problems, "rank 1", {"deadlock", "1F1", "0F1"});

  // validate() throws with the problems, and the simulator refuses the schedule too.
  test::expect_error_with<InvalidSchedule>([&] { validate(s); }, {"2 problems", "deadlock"});
  test::expect_error_with<InvalidSchedule>([&] { simulate(s, CostModel{}); }, {"deadlock", "rank 0"});
}

TEST(Validate, DeadlockInAGeneratedScheduleAfterOneMove) {
  // 1F1B R=4 M=8 with rank 0's first backward 0B0 moved right after 0F0. Rank 0 then waits at 0B0 for
  // 1B0, but rank 1 needs 0F1 (now after 0B0 on rank 0) for its second warm-up forward 1F1 before it
  // can reach 1B0; ranks 2 and 3 starve behind rank 1.
  Schedule s = make_1f1b(ScheduleOptions{4, 8});
  auto& r0 = s.actions[0];
  const auto b0 = std::find(r0.begin(), r0.end(), Action::backward(0, 0));
  ASSERT_NE(b0, r0.end());
  r0.erase(b0);
  r0.insert(r0.begin() + 1, Action::backward(0, 0));
  const auto problems = find_problems(s);
  EXPECT_EQ(problems.size(), 4u) << test::join_lines(problems);
  expect_problem(problems, "deadlock: rank 0", {"0B0", "1B0"});
  expect_problem(problems, "deadlock: rank 1", {"1F1", "waiting for 0F1"});
}

TEST(Validate, OutOfRangeIndices) {
  Schedule s = parse_text(k1F1B);
  s.actions[0].push_back(Action::forward(0, 5));    // micro-batch 5 of 2
  s.actions[1].push_back(Action::backward(7, 0));   // stage 7 of 2
  s.actions[1].push_back(Action::overlapped(1, 0, 1, -1));
  const auto problems = find_problems(s);
  expect_problem(problems, "0F5", {"rank 0 position 4", "outside"});
  expect_problem(problems, "7B0", {"rank 1 position 4"});
  expect_problem(problems, "(1F0;1B-1)", {"rank 1 position 5"});
  // The simulator refuses them as well, naming the action.
  test::expect_error_with<InvalidSchedule>([&] { simulate(s, CostModel{}); }, {"0F5"});
}

TEST(Validate, ShapeProblems) {
  Schedule empty;
  EXPECT_TRUE(contains(test::join_lines(find_problems(empty)), "at least one rank"));

  Schedule s = parse_text(k1F1B);
  s.actions.pop_back();  // two ranks declared, one list
  EXPECT_TRUE(contains(test::join_lines(find_problems(s)), "holds action lists for 1"));

  Schedule p = parse_text(k1F1B);
  p.placement = Placement::linear(3);
  EXPECT_TRUE(contains(test::join_lines(find_problems(p)), "placement covers 3 ranks"));
}

// ---- communication checks (the lowered form) ----

TEST(Validate, UnmatchedCommunication) {
  // Lowered 1F1B R=2 M=2 without rank 1's receive of 1F0's input.
  Schedule s = lower_communication(parse_text(k1F1B));
  remove_action(s, 1, Action::communication(ActionType::RecvForward, 1, 0, 0));
  // 0SEND_F0 at rank 0: where the orphan is.
  expect_problem(find_problems(s), "unmatched communication", {"0F0", "SEND without its RECV", "0SEND_F0 at rank 0"});
}

TEST(Validate, CommunicationWithTheWrongPeer) {
  Schedule s = lower_communication(make_1f1b(ScheduleOptions{3, 3}));
  for (Action& a : s.actions[1]) {
    if (a.type == ActionType::SendForward && a.microbatch == 1) a.peer = 0;  // should be 2
  }
  expect_problem(find_problems(s), "1SEND_F1", {"rank 1", "does not match the placement"});
}

TEST(Validate, CommunicationDeadlock) {
  // Lowered 1F1B R=2 M=2, rank 0's receive of 0B0's gradient moved before its send of 0F0's output:
  //   rank 0: 0F0 0RECV_B0 0SEND_F0 ...   rank 1: 1RECV_F0 1F0 1B0 1SEND_B0 ...
  // Rank 0 waits for 1SEND_B0, rank 1 for 0SEND_F0. The compute order alone is fine.
  Schedule s = lower_communication(parse_text(k1F1B));
  auto& r0 = s.actions[0];
  const auto recv = std::find(r0.begin(), r0.end(), Action::communication(ActionType::RecvBackward, 0, 0, 1));
  ASSERT_NE(recv, r0.end());
  const Action moved = *recv;
  r0.erase(recv);
  r0.insert(r0.begin() + 1, moved);
  ASSERT_EQ(format_text(s).substr(0, 34), "rank 0: 0F0 0RECV_B0 0SEND_F0 0F1 ");
  const auto problems = find_problems(s);
  expect_problem(problems, "deadlock: rank 0", {"0RECV_B0"});
  expect_problem(problems, "deadlock: rank 1", {"1RECV_F0"});
}

TEST(Validate, ThrowListsTheFirstProblems) {
  // 1F1B R=3 M=20 with all of rank 2's actions dropped: 40 missing actions, more than validate() shows.
  Schedule s = make_1f1b(ScheduleOptions{3, 20});
  s.actions[2].clear();
  test::expect_error_with<InvalidSchedule>([&] { validate(s); },
                                           {"invalid 1f1b schedule", "missing action 2F0", "more"});
}

}  // namespace
}  // namespace dualpipe
