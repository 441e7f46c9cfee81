// Issue 75, item 1: the diagnosis of a stall from the ranks' states (stall_report.h), on states written by hand
// for pipelines whose cause is known, and the flight recorder that the states come from.
#include <gtest/gtest.h>

#include <thread>

#include <nlohmann/json.hpp>

#include "dualpipe/runtime/flight_recorder.h"
#include "dualpipe/runtime/stall_report.h"

namespace dualpipe::runtime {
namespace {

RankStall waiting(int rank, const std::string& message, int peer, double seconds, int position = 0) {
  RankStall s;
  s.rank = rank;
  s.schedule = "1f1b, 4 ranks, 8 micro-batches";
  s.fingerprint = 7;
  s.step = 3;
  s.in_step = true;
  s.action = "RECV";
  s.wait = RankStall::Wait{message, peer, true, position, seconds};
  return s;
}

RankStall inside(int rank, const std::string& action, double seconds) {
  RankStall s = waiting(rank, "", 0, 0);
  s.wait.reset();
  s.action = action;
  s.action_seconds = seconds;
  return s;
}

TEST(StallReport, TheRankEveryoneWaitsOnIsTheOneInsideAnAction) {
  // rank 3 waits on 2, 2 on 1, 0 on 1; rank 1 computes for 40 s.
  const StallReport r = diagnose_stall({waiting(0, "1SEND_B5", 1, 39), inside(1, "1F5", 40),
                                        waiting(2, "1SEND_F5", 1, 38), waiting(3, "2SEND_F4", 2, 37)},
                                       4);
  EXPECT_EQ(r.cause, "inside_action");
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.action, "1F5");
  EXPECT_NE(r.headline.find("rank 1 is inside 1F5 for 40.0 s"), std::string::npos) << r.headline;
  EXPECT_EQ(r.lines.size(), 4u);
  EXPECT_TRUE(r.missing.empty());
}

TEST(StallReport, WaitsThatGoRoundAreACycle) {
  const StallReport r = diagnose_stall({waiting(0, "1SEND_B3", 1, 5), waiting(1, "0SEND_F4", 0, 5)}, 2);
  EXPECT_EQ(r.cause, "cycle");
  EXPECT_NE(r.headline.find("ranks 0 -> 1 -> 0"), std::string::npos) << r.headline;
}

TEST(StallReport, AWaitOnARankWithoutAStateNamesThatRank) {
  const StallReport r = diagnose_stall({waiting(0, "1SEND_B3", 1, 5), waiting(2, "1SEND_F3", 1, 5)}, 3);
  EXPECT_EQ(r.cause, "no_state");
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.missing, std::vector<int>{1});
}

TEST(StallReport, AWaitOnARankBetweenStepsSaysSo) {
  RankStall done = inside(0, "", 0);
  done.action.clear();
  done.in_step = false;
  done.idle_seconds = 12;
  const StallReport r = diagnose_stall({done, waiting(1, "0SEND_F0", 0, 11)}, 2);
  EXPECT_EQ(r.cause, "outside_step");
  EXPECT_EQ(r.rank, 0);
  EXPECT_NE(r.headline.find("rank 0 is between steps"), std::string::npos) << r.headline;
}

TEST(StallReport, AMessageItsSenderSentIsLostAndOutranksTheCycleItMakes) {
  RankStall sender = waiting(0, "1SEND_B2", 1, 4);
  sender.sent[1] = 4;  // F0..F3
  RankStall receiver = waiting(1, "0SEND_F3", 0, 5, 3);
  receiver.received[0] = 3;
  const StallReport r = diagnose_stall({sender, receiver}, 2);
  EXPECT_EQ(r.cause, "lost_message");
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.action, "0SEND_F3");
  // Not lost while the sender has sent only the messages before it.
  sender.sent[1] = 3;
  EXPECT_EQ(diagnose_stall({sender, receiver}, 2).cause, "cycle");
  // Lost too when the sender went on to a later step.
  sender.step = 4;
  sender.sent[1] = 0;
  EXPECT_EQ(diagnose_stall({sender, receiver}, 2).cause, "lost_message");
}

TEST(StallReport, DifferentSchedulesComeFirstAndNameTheOddRank) {
  RankStall other = waiting(1, "0SEND_F4", 0, 5, 4);
  other.fingerprint = 9;
  other.schedule = "1f1b, 4 ranks, 10 micro-batches";
  const StallReport r = diagnose_stall({waiting(0, "1SEND_B3", 1, 5), other, waiting(2, "1SEND_F3", 1, 5)}, 3);
  EXPECT_EQ(r.cause, "schedule_mismatch");
  EXPECT_EQ(r.rank, 1);
  EXPECT_NE(r.headline.find("ranks 0, 2 run 1f1b, 4 ranks, 8 micro-batches"), std::string::npos) << r.headline;
  EXPECT_NE(r.headline.find("rank 1 runs 1f1b, 4 ranks, 10 micro-batches"), std::string::npos) << r.headline;
}

TEST(StallReport, NoWaitIsNoStall) {
  const StallReport r = diagnose_stall({inside(0, "0F1", 0.2), inside(1, "1B0", 0.5)}, 2);
  EXPECT_EQ(r.cause, "none");
  EXPECT_NE(r.headline.find("rank 1 inside 1B0"), std::string::npos) << r.headline;
}

TEST(StallReport, StatesTravelAsJsonAndBadOnesAreNamed) {
  RankStall s = waiting(2, "1SEND_F5", 1, 3.5, 5);
  s.sent[3] = 2;
  s.received[1] = 5;
  s.recent.push_back({"receive", "1SEND_F4", 1, 4096, 3, 0.25, 0.001});
  const RankStall back = rank_stall_from_json(nlohmann::json::parse(to_json(s).dump()));
  EXPECT_EQ(to_json(back), to_json(s));
  nlohmann::json bad = to_json(s);
  bad.erase("step");
  EXPECT_THROW(
      {
        try {
          rank_stall_from_json(bad);
        } catch (const InvalidArgument& e) {
          EXPECT_NE(std::string(e.what()).find("'step'"), std::string::npos) << e.what();
          throw;
        }
      },
      InvalidArgument);
  // Round four: numbers of the wrong kind or range (nlohmann converts them with undefined behaviour), a fingerprint
  // and a peer that are not numbers (std::stoull's exceptions escaped as std::invalid_argument).
  const auto expect_named = [&](const char* key, const nlohmann::json& value, const std::string& says) {
    nlohmann::json j = to_json(s);
    j[key] = value;
    try {
      rank_stall_from_json(j);
      ADD_FAILURE() << key << "=" << value.dump() << " accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  expect_named("step", 1e30, "field 'step' that is not a whole number in range");
  expect_named("rank", 4294967296LL, "field 'rank' that is not a whole number in range");
  expect_named("fingerprint", "12x", "a fingerprint '12x', not a number");
  expect_named("sent", nlohmann::json{{"one", 2}}, "a peer 'one', not a number");
  expect_named("sent", nlohmann::json{{"1", 2.5}}, "a message count that is not a whole number");
}

TEST(FlightRecorder, KeepsTheLastEventsAndWhatTheRankWaitsFor) {
  FlightRecorder recorder(3);
  recorder.step_started(0, "1f1b, 2 ranks, 4 micro-batches", 11);
  for (int m = 0; m < 4; ++m) {
    recorder.action_started(m, Action::forward(0, m));
    recorder.action_ended();
  }
  recorder.message_sent(Action::communication(ActionType::SendForward, 0, 3, -1), 1, 64);
  recorder.action_started(4, Action::communication(ActionType::RecvBackward, 0, 0, 1));
  recorder.waiting_for(Action::communication(ActionType::SendBackward, 1, 0, -1), 1, true, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const FlightSnapshot snap = recorder.snapshot();
  ASSERT_EQ(snap.recent.size(), 3u);  // the ring keeps the newest three, oldest first
  EXPECT_EQ(to_string(snap.recent[0].action), "0F2");
  EXPECT_EQ(to_string(snap.recent[1].action), "0F3");
  EXPECT_EQ(to_string(snap.recent[2].action), "0SEND_F3");
  EXPECT_EQ(snap.sent.at(1), 1);
  const RankStall s = rank_stall(snap, 5, {5, 6});
  ASSERT_TRUE(s.wait);
  EXPECT_EQ(s.wait->message, "1SEND_B0");
  EXPECT_EQ(s.wait->peer, 6);  // communicator rank 1 is world rank 6
  EXPECT_GE(s.wait->seconds, 0.015);
  EXPECT_EQ(s.sent.at(6), 1);
  recorder.message_received(64);
  recorder.action_ended();
  recorder.step_ended();
  const FlightSnapshot after = recorder.snapshot();
  EXPECT_FALSE(after.in_step);
  EXPECT_FALSE(after.wait);
  EXPECT_EQ(after.received.at(1), 1);
}

}  // namespace
}  // namespace dualpipe::runtime
