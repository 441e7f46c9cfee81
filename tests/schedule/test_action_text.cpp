// Action text forms (spec section 1, PyTorch's notation) and the canonical schedule text form.
// Expected strings are written by hand from the spec; round trips of generated schedules only check that
// format and parse are inverse to each other, never a stored output of our own code.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dualpipe/schedule/action.h"
#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/placement.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/schedule/validate.h"
#include "dualpipe/util/error.h"
#include "test_helpers.h"

namespace dualpipe {
namespace {

using test::contains;
using test::error_message;
using test::expect_error_with;

// ---------------------------------------------------------------- parse_action / to_string, every type

struct ActionCase {
  const char* text;
  Action action;
};

TEST(ActionText, ParsesAndPrintsEveryType) {
  const ActionCase cases[] = {
      {"0F1", {ActionType::Forward, 0, 1}},
      {"3B5", {ActionType::Backward, 3, 5}},
      {"2I0", {ActionType::BackwardInput, 2, 0}},
      {"2W0", {ActionType::BackwardWeight, 2, 0}},
      {"12F345", {ActionType::Forward, 12, 345}},
      {"(0F3;3B5)", Action::overlapped(0, 3, 3, 5)},
      {"1SEND_F0", {ActionType::SendForward, 1, 0}},
      {"1RECV_F0", {ActionType::RecvForward, 1, 0}},
      {"2SEND_B4", {ActionType::SendBackward, 2, 4}},
      {"2RECV_B4", {ActionType::RecvBackward, 2, 4}},
  };
  for (const ActionCase& c : cases) {
    SCOPED_TRACE(c.text);
    const Action parsed = parse_action(c.text);
    EXPECT_EQ(parsed, c.action);
    EXPECT_EQ(parsed.peer, -1) << "a parsed action has no peer; the placement decides it";
    EXPECT_EQ(to_string(c.action), c.text);
  }
}

TEST(ActionText, OverlappedPairHalves) {
  const Action a = parse_action("(0F3;3B5)");
  EXPECT_EQ(a.type, ActionType::Overlapped);
  EXPECT_EQ(a.stage, 0);
  EXPECT_EQ(a.microbatch, 3);
  EXPECT_EQ(a.bwd_stage, 3);
  EXPECT_EQ(a.bwd_microbatch, 5);
  EXPECT_EQ(a.forward_half(), Action::forward(0, 3));
  EXPECT_EQ(a.backward_half(), Action::backward(3, 5));
  EXPECT_TRUE(a.is_compute());
}

TEST(ActionText, PyTorchOverlapSuffixIsAccepted) {
  // torch.distributed.pipelining writes an overlapped pair as "(0F3;3B5)OVERLAP_F_B".
  EXPECT_EQ(parse_action("(0F3;3B5)OVERLAP_F_B"), Action::overlapped(0, 3, 3, 5));
  EXPECT_EQ(parse_action("(0F7;7B3)OVERLAP_F_B"), Action::overlapped(0, 7, 7, 3));
  // Our canonical form drops the suffix.
  EXPECT_EQ(to_string(parse_action("(0F7;7B3)OVERLAP_F_B")), "(0F7;7B3)");
}

TEST(ActionText, CommunicationPeerIsNotPartOfTheText) {
  EXPECT_EQ(to_string(Action::communication(ActionType::SendForward, 1, 0, 2)), "1SEND_F0");
  EXPECT_TRUE(parse_action("1SEND_F0").is_communication());
}

TEST(ActionText, TypeNames) {
  EXPECT_EQ(type_name(ActionType::Forward), "F");
  EXPECT_EQ(type_name(ActionType::Backward), "B");
  EXPECT_EQ(type_name(ActionType::BackwardInput), "I");
  EXPECT_EQ(type_name(ActionType::BackwardWeight), "W");
  EXPECT_EQ(type_name(ActionType::Overlapped), "OVERLAP_F_B");
  EXPECT_EQ(type_name(ActionType::SendForward), "SEND_F");
  EXPECT_EQ(type_name(ActionType::RecvForward), "RECV_F");
  EXPECT_EQ(type_name(ActionType::SendBackward), "SEND_B");
  EXPECT_EQ(type_name(ActionType::RecvBackward), "RECV_B");
}

TEST(ActionText, BadInputsThrowNamingTheText) {
  const char* bad[] = {
      "F0",          // no stage
      "0F",          // no micro-batch
      "0X1",         // unknown type
      "0f1",         // types are upper case
      "0F1x",        // trailing junk
      "0F1 ",        // trailing space inside a token
      "-1F0",        // negative stage
      "0OVERLAP_F_B1",  // the pair's type name is not a simple action
      "0SEND1",      // unknown communication type
      "(0F1;3B0",    // unclosed pair
      "(0F1 3B0)",   // no separator
      "(0B1;3F0)",   // halves in the wrong order
      "(0F1;3I0)",   // a pair's backward is a full B
      "(0F1;0W1)",   // ... not W
      "(0X1;3B0)",   // bad half
      "(0F1;)",      // empty half
      "(;)",         // both halves empty
      "()",          // nothing inside
      "99999999999F0",  // stage out of int range
  };
  for (const char* text : bad) {
    SCOPED_TRACE(text);
    const std::string message = error_message([&] { parse_action(text); });
    EXPECT_TRUE(contains(message, std::string("'") + text + "'")) << message;
  }
  EXPECT_FALSE(error_message([] { parse_action(""); }).empty());
}

// ---------------------------------------------------------------- schedule text form

// DualPipe R=2 M=4, two-direction placement: derived by hand from spec section 4 (see
// test_dualpipe_order.cpp for the derivation). Micro-batches 2, 3 enter at rank 1.
constexpr const char* kDualPipeText =
    "rank 0: 0F0 1F2 0F1 1B2 (1F3;0B0) 1B3 0I1 0W1\n"
    "rank 1: 0F2 1F0 0F3 1B0 (1F1;0B2) 1B1 0I3 0W3\n";

// A V placement written by hand: R=2, S=4, rank 0 holds stages 0 and 3, rank 1 stages 1 and 2.
constexpr const char* kVText =
    "rank 0: 0F0 0F1 3F0 3I0 3W0 3F1 3B1 0B0 0B1\n"
    "rank 1: 1F0 2F0 1F1 2F1 2B0 1B0 2B1 1I1 1W1\n";

TEST(ScheduleText, HandWrittenTwoDirectionRoundTrip) {
  const Schedule s = parse_text(kDualPipeText);
  EXPECT_EQ(format_text(s), kDualPipeText);
  EXPECT_EQ(s.kind, "custom");
  EXPECT_EQ(s.num_ranks, 2);
  EXPECT_EQ(s.num_stages, 2);
  EXPECT_EQ(s.num_microbatches, 4);
  // Inferred: micro-batches 0,1 run stage 0 on rank 0 (replica 0), 2,3 run stage 0 on rank 1 (replica 1).
  EXPECT_EQ(s.placement, Placement::bidirectional(2, {0, 0, 1, 1}));
  EXPECT_EQ(s.placement.rank(0, 2), 1);
  EXPECT_EQ(s.placement.rank(1, 2), 0);
  EXPECT_TRUE(find_problems(s).empty()) << test::join_lines(find_problems(s));
}

TEST(ScheduleText, HandWrittenVRoundTrip) {
  const Schedule s = parse_text(kVText);
  EXPECT_EQ(format_text(s), kVText);
  EXPECT_EQ(s.num_ranks, 2);
  EXPECT_EQ(s.num_stages, 4);
  EXPECT_EQ(s.num_microbatches, 2);
  EXPECT_EQ(s.placement, Placement::v_shape(2));
  EXPECT_EQ(s.placement.num_replicas(), 1);
  EXPECT_TRUE(find_problems(s).empty()) << test::join_lines(find_problems(s));
}

TEST(ScheduleText, SpecExampleLineParses) {
  // Spec section 1's example line; a one-rank text with gaps is not a valid schedule but parses.
  const Schedule s = parse_text("rank 0: 0F0 0F1 (0F3;7B11) 0I2 0W2\n");
  ASSERT_EQ(s.actions.size(), 1u);
  EXPECT_EQ(test::join(s.actions[0]), "0F0 0F1 (0F3;7B11) 0I2 0W2");
  EXPECT_EQ(s.num_stages, 8);
  EXPECT_EQ(s.num_microbatches, 12);
}

TEST(ScheduleText, CommentsBlankLinesAndCarriageReturnsAreIgnored) {
  const Schedule s = parse_text("# a comment\n\nrank 0: 0F0  0B0\r\n  # another\nrank 1:\t1F0 1B0\n");
  EXPECT_EQ(format_text(s), "rank 0: 0F0 0B0\nrank 1: 1F0 1B0\n");
}

TEST(ScheduleText, EveryGeneratorRoundTripsAcrossAGrid) {
  int checked = 0;
  const auto counts = [](int R) { return std::vector<int>{1, 2, R, 2 * R, 2 * R + 1, 3 * R, 4 * R}; };
  for (const auto& [name, R, M, s] : test::grid_schedules(counts)) {
    SCOPED_TRACE(name + " R=" + std::to_string(R) + " M=" + std::to_string(M));
    const std::string text = format_text(s);
    const Schedule back = parse_text(text);
    EXPECT_EQ(format_text(back), text);
    EXPECT_EQ(back.actions, s.actions);
    EXPECT_EQ(back.num_ranks, s.num_ranks);
    EXPECT_EQ(back.num_stages, s.num_stages);
    EXPECT_EQ(back.num_microbatches, s.num_microbatches);
    EXPECT_EQ(back.placement, s.placement) << "the placement inferred from the text differs";
    ++checked;
  }
  EXPECT_GT(checked, 50);
}

TEST(ScheduleText, FormatWritesOneLinePerRank) {
  Schedule s;
  s.actions = {{Action::forward(0, 0), Action::overlapped(0, 1, 1, 0)}, {}};
  EXPECT_EQ(format_text(s), "rank 0: 0F0 (0F1;1B0)\nrank 1:\n");
}

TEST(ScheduleText, WrongRankOrderNamesTheLine) {
  expect_error_with([] { parse_text("rank 1: 0F0\nrank 0: 1F0\n"); }, {"line 1", "rank 0"});
  // Line numbers count comments and blank lines too: the bad line is line 4.
  expect_error_with([] { parse_text("# header\nrank 0: 0F0 0B0\n\nrank 2: 1F0\n"); }, {"line 4", "rank 2: 1F0"});
  expect_error_with([] { parse_text("rank 0 0F0\n"); }, {"line 1"});
}

TEST(ScheduleText, BadTokenNamesTheLineAndToken) {
  expect_error_with([] { parse_text("rank 0: 0F0 0B0\nrank 1: 1F0 1Q0 1B0\n"); }, {"line 2", "'1Q0'"});
  expect_error_with([] { parse_text("rank 0: 0F0 (0F1;1X0)\n"); }, {"line 1", "(0F1;1X0)"});
}

TEST(ScheduleText, EmptyOrPlacementlessTextsAreRejected) {
  EXPECT_THROW(parse_text(""), InvalidArgument);
  EXPECT_THROW(parse_text("# only a comment\n"), InvalidArgument);
  // Without 0F0 the placement cannot be inferred.
  EXPECT_THROW(parse_text("rank 0: 0B0\n"), InvalidArgument);
}

TEST(ScheduleText, InconsistentPlacementIsRejected) {
  // Stage 1 of one direction (micro-batch 0 and 1 both enter at rank 0) on two different ranks.
  expect_error_with<InvalidSchedule>([] { parse_text("rank 0: 0F0 0F1 1F1\nrank 1: 1F0\n"); }, {"stage 1"});
}

}  // namespace
}  // namespace dualpipe
