// The communication lowering (lower.h): SEND/RECV actions derived from the compute actions and the
// placement. Checked three ways:
//  - hand-derived lowered texts for small cases;
//  - a structural check for every generator: each cross-rank dependency gets exactly one SEND on the
//    producer's rank right after the producing action and one RECV on the consumer's rank right before the
//    consuming action, with the right peers; same-rank dependencies get none;
//  - an independent message-passing executor written here (per-rank cursors, mailboxes, RECV blocks until
//    its message is there, compute checks that its inputs are present locally) that must run every lowered
//    schedule to completion.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <tuple>
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

// ------------------------------------------------------------------------------------------------
// Hand-derived lowered texts.
// ------------------------------------------------------------------------------------------------

TEST(Lower, OneFOneBTwoRanksByHand) {
  // 1F1B R=2 M=2: rank 0 runs 0F0 0F1 0B0 0B1, rank 1 runs 1F0 1B0 1F1 1B1 (stage s on rank s).
  //  rank 0: each forward of stage 0 feeds stage 1 on rank 1 -> SEND_F right after it; each backward of
  //          stage 0 needs the gradient from stage 1 -> RECV_B right before it; stage 0 sends no gradient.
  //  rank 1: each forward of stage 1 needs stage 0's output -> RECV_F before it; the last stage sends no
  //          output; each backward of stage 1 sends the input gradient to stage 0 -> SEND_B after it.
  const Schedule lowered = lower_communication(make_1f1b(ScheduleOptions{2, 2}));
  EXPECT_EQ(format_text(lowered),
            "rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1\n"
            "rank 1: 1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1\n");
  // Peers: always the other rank.
  for (int r = 0; r < 2; ++r) {
    for (const Action& a : lowered.actions[r]) {
      if (a.is_communication()) {
        EXPECT_EQ(a.peer, 1 - r) << to_string(a);
      }
    }
  }
  EXPECT_TRUE(lowered.has_communication());
  EXPECT_FALSE(make_1f1b(ScheduleOptions{2, 2}).has_communication());
}

TEST(Lower, DualPipeTwoRanksByHand) {
  // DualPipe R=2 M=4 (orders hand-derived in test_dualpipe_order.cpp). Direction 0 (mb 0,1): stage 0 on
  // rank 0, stage 1 on rank 1; direction 1 (mb 2,3): stage 0 on rank 1, stage 1 on rank 0.
  //  rank 0: 0F0 -> SEND_F0 to rank 1; 1F2 needs RECV_F2 from rank 1; 0F1 -> SEND_F1; 1B2 (stage 1 of
  //  direction 1) sends its gradient to stage 0 on rank 1; the pair (1F3;0B0) receives both 1F3's input and
  //  0B0's gradient before it and sends nothing (last stage forward, first stage backward); 1B3 -> SEND_B3;
  //  0I1 needs RECV_B1; 0W1 needs no message. Rank 1 mirrors it.
  const Schedule lowered = lower_communication(make_dualpipe(ScheduleOptions{2, 4}));
  EXPECT_EQ(format_text(lowered),
            "rank 0: 0F0 0SEND_F0 1RECV_F2 1F2 0F1 0SEND_F1 1B2 1SEND_B2 1RECV_F3 0RECV_B0 (1F3;0B0) 1B3 "
            "1SEND_B3 0RECV_B1 0I1 0W1\n"
            "rank 1: 0F2 0SEND_F2 1RECV_F0 1F0 0F3 0SEND_F3 1B0 1SEND_B0 1RECV_F1 0RECV_B2 (1F1;0B2) 1B1 "
            "1SEND_B1 0RECV_B3 0I3 0W3\n");
}

TEST(Lower, SingleRankNeedsNoMessages) {
  // R=1: every dependency is on the same rank.
  for (const char* kind : {"gpipe", "1f1b", "zb-h1", "dualpipev"}) {
    const Schedule s = make_schedule(kind, ScheduleOptions{1, 3});
    EXPECT_EQ(lower_communication(s).actions, s.actions) << kind;
  }
}

TEST(Lower, VTurnNeedsNoMessage) {
  // DualPipeV R=2: stages 1 and 2 both live on rank 1, so stage 1's output and stage 2's input gradient
  // stay there. The other hops (0<->1, 2<->3) cross ranks.
  const Schedule lowered = lower_communication(make_dualpipev(ScheduleOptions{2, 4}));
  for (int r = 0; r < 2; ++r) {
    for (const Action& a : lowered.actions[r]) {
      if (!a.is_communication()) continue;
      EXPECT_FALSE(a.type == ActionType::SendForward && a.stage == 1) << to_string(a);
      EXPECT_FALSE(a.type == ActionType::RecvForward && a.stage == 2) << to_string(a);
      EXPECT_FALSE(a.type == ActionType::SendBackward && a.stage == 2) << to_string(a);
      EXPECT_FALSE(a.type == ActionType::RecvBackward && a.stage == 1) << to_string(a);
    }
  }
}

TEST(Lower, RejectsAnAlreadyLoweredSchedule) {
  const Schedule lowered = lower_communication(make_gpipe(ScheduleOptions{2, 2}));
  const std::string m = test::error_message([&] { lower_communication(lowered); });
  EXPECT_TRUE(contains(m, "SEND/RECV")) << m;
}

// ------------------------------------------------------------------------------------------------
// Structural check against the dependencies of spec section 2.
// ------------------------------------------------------------------------------------------------

// Whether compute action `a` produces (or, for consumers, runs) the forward / backward of (stage, m).
bool runs_forward(const Action& a, int stage, int m) {
  return (a.type == ActionType::Forward || a.type == ActionType::Overlapped) && a.stage == stage &&
         a.microbatch == m;
}
bool runs_backward(const Action& a, int stage, int m) {
  if (a.type == ActionType::Overlapped) return a.bwd_stage == stage && a.bwd_microbatch == m;
  return (a.type == ActionType::Backward || a.type == ActionType::BackwardInput) && a.stage == stage &&
         a.microbatch == m;
}

struct Position {
  int rank;
  int index;
};

// Every communication action of the given type, stage and micro-batch, wherever it is.
std::vector<Position> find_comm(const Schedule& s, ActionType type, int stage, int m) {
  std::vector<Position> found;
  for (int r = 0; r < s.num_ranks; ++r) {
    for (int i = 0; i < static_cast<int>(s.actions[r].size()); ++i) {
      const Action& a = s.actions[r][i];
      if (a.type == type && a.stage == stage && a.microbatch == m) found.push_back({r, i});
    }
  }
  return found;
}

// The compute action just before (step -1) or after (step +1) position i, skipping communication.
const Action* neighbour_compute(const Schedule& s, Position p, int step) {
  for (int i = p.index + step; i >= 0 && i < static_cast<int>(s.actions[p.rank].size()); i += step) {
    if (s.actions[p.rank][i].is_compute()) return &s.actions[p.rank][i];
  }
  return nullptr;
}

// One dependency edge: a SEND of `send_type` named by the producer stage, a RECV of `recv_type` named by
// the consumer stage.
void check_edge(const Schedule& lowered, ActionType send_type, ActionType recv_type, int producer, int consumer,
                int m, bool backward, int& cross_edges) {
  const int p = lowered.placement.rank(producer, m);
  const int c = lowered.placement.rank(consumer, m);
  const auto sends = find_comm(lowered, send_type, producer, m);
  const auto recvs = find_comm(lowered, recv_type, consumer, m);
  const std::string what = std::string(backward ? "gradient " : "output ") + std::to_string(producer) +
                           (backward ? "B" : "F") + std::to_string(m) + " -> stage " + std::to_string(consumer);
  if (p == c) {
    EXPECT_TRUE(sends.empty()) << what << ": same-rank dependency got a SEND";
    EXPECT_TRUE(recvs.empty()) << what << ": same-rank dependency got a RECV";
    return;
  }
  ++cross_edges;
  ASSERT_EQ(sends.size(), 1u) << what;
  ASSERT_EQ(recvs.size(), 1u) << what;
  // The SEND: on the producer's rank, to the consumer's rank, right after the producing compute action.
  EXPECT_EQ(sends[0].rank, p) << what;
  EXPECT_EQ(lowered.actions[sends[0].rank][sends[0].index].peer, c) << what;
  const Action* produced_by = neighbour_compute(lowered, sends[0], -1);
  ASSERT_NE(produced_by, nullptr) << what;
  EXPECT_TRUE(backward ? runs_backward(*produced_by, producer, m) : runs_forward(*produced_by, producer, m))
      << what << ": SEND follows " << to_string(*produced_by);
  // The RECV: on the consumer's rank, from the producer's rank, right before the consuming compute action.
  EXPECT_EQ(recvs[0].rank, c) << what;
  EXPECT_EQ(lowered.actions[recvs[0].rank][recvs[0].index].peer, p) << what;
  const Action* consumed_by = neighbour_compute(lowered, recvs[0], +1);
  ASSERT_NE(consumed_by, nullptr) << what;
  EXPECT_TRUE(backward ? runs_backward(*consumed_by, consumer, m) : runs_forward(*consumed_by, consumer, m))
      << what << ": RECV precedes " << to_string(*consumed_by);
}

void check_lowering(const Schedule& compute, const Schedule& lowered) {
  // The compute actions are untouched and in the same order.
  ASSERT_EQ(lowered.actions.size(), compute.actions.size());
  for (int r = 0; r < compute.num_ranks; ++r) {
    std::vector<Action> only_compute;
    for (const Action& a : lowered.actions[r]) {
      if (a.is_compute()) only_compute.push_back(a);
    }
    EXPECT_EQ(only_compute, compute.actions[r]) << "rank " << r;
  }
  EXPECT_EQ(lowered.placement, compute.placement);

  int cross_edges = 0;
  const int S = compute.num_stages;
  for (int m = 0; m < compute.num_microbatches; ++m) {
    for (int s = 0; s + 1 < S; ++s) {
      check_edge(lowered, ActionType::SendForward, ActionType::RecvForward, s, s + 1, m, false, cross_edges);
    }
    for (int s = 1; s < S; ++s) {
      check_edge(lowered, ActionType::SendBackward, ActionType::RecvBackward, s, s - 1, m, true, cross_edges);
    }
  }
  // Nothing else: two messages' worth of actions per cross-rank edge.
  EXPECT_EQ(lowered.num_actions() - compute.num_actions(), static_cast<std::size_t>(2 * cross_edges));
}

TEST(Lower, EveryGeneratorOnASmallGrid) {
  int checked = 0;
  for (const GeneratorInfo& g : generators()) {
    for (int R : {1, 2, 3, 4}) {
      for (int M : {1, 2, R, 2 * R, 2 * R + 1, 3 * R}) {
        Schedule s;
        try {
          s = g.make(ScheduleOptions{R, M});
        } catch (const InvalidArgument&) {
          continue;
        }
        SCOPED_TRACE(std::string(g.name) + " R=" + std::to_string(R) + " M=" + std::to_string(M));
        const Schedule lowered = lower_communication(s);
        // Valid, including the communication checks and the deadlock walk where RECV waits for its SEND.
        const auto problems = find_problems(lowered);
        EXPECT_TRUE(problems.empty()) << test::join_lines(problems);
        check_lowering(s, lowered);
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 40);
}

TEST(Lower, LoweredTextRoundTripsWithPeersFromThePlacement) {
  for (const char* kind : {"1f1b", "dualpipe", "dualpipev", "zb-h2"}) {
    const Schedule lowered = lower_communication(make_schedule(kind, ScheduleOptions{4, 8}));
    const Schedule back = parse_text(format_text(lowered));
    EXPECT_EQ(back.actions, lowered.actions) << kind;  // Action equality includes the peer
    EXPECT_TRUE(find_problems(back).empty()) << kind;
  }
}

TEST(Lower, LoweringDoesNotChangeSimulatedComputeTimes) {
  // SEND/RECV take no time; the latency is on the data edges either way.
  CostModel costs;
  costs.comm = 0.25;
  for (const char* kind : {"1f1b", "zb-h1", "dualpipe", "dualpipev"}) {
    const Schedule s = make_schedule(kind, ScheduleOptions{4, 8});
    const Schedule lowered = lower_communication(s);
    const Simulation a = simulate(s, costs), b = simulate(lowered, costs);
    EXPECT_DOUBLE_EQ(a.metrics.makespan, b.metrics.makespan) << kind;
    for (int r = 0; r < s.num_ranks; ++r) {
      int j = 0;
      for (std::size_t i = 0; i < lowered.actions[r].size(); ++i) {
        if (!lowered.actions[r][i].is_compute()) continue;
        EXPECT_DOUBLE_EQ(b.timeline[r][i].start, a.timeline[r][j].start) << kind << " rank " << r;
        EXPECT_DOUBLE_EQ(b.timeline[r][i].end, a.timeline[r][j].end) << kind << " rank " << r;
        ++j;
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------
// An independent message-passing executor.
// ------------------------------------------------------------------------------------------------

// Runs a lowered schedule with asynchronous sends: SEND puts a message in the peer's mailbox, RECV blocks
// until the message from the named peer is in its own mailbox, and every compute action checks that its
// inputs are present on its rank (computed there, or received). Returns "" when every rank finishes and
// every message is consumed, or what went wrong.
std::string execute(const Schedule& s) {
  const int R = s.num_ranks, S = s.num_stages;
  using Key = std::pair<int, int>;  // (stage, micro-batch)
  // A message: (kind 'F' or 'B', consumer stage, micro-batch, sender).
  using Message = std::tuple<char, int, int, int>;
  std::vector<std::multiset<Message>> mailbox(R);

  struct RankState {
    std::set<Key> output;          // sFm computed here: its output and stashed activations
    std::set<Key> input_grad;      // sBm / sIm computed here: the gradient for stage s-1
    std::set<Key> received_input;  // RECV_F done: input of sFm
    std::set<Key> received_grad;   // RECV_B done: output gradient for sBm / sIm
    std::set<Key> deferred;        // sIm done, sWm pending
  };
  std::vector<RankState> state(R);
  std::vector<std::size_t> cursor(R, 0);

  auto where = [&](int r) {
    return "rank " + std::to_string(r) + " at " + to_string(s.actions[r][cursor[r]]) + " (position " +
           std::to_string(cursor[r]) + ")";
  };
  auto forward_input_ok = [&](int r, int st, int m) {
    return st == 0 || state[r].received_input.count({st, m}) || state[r].output.count({st - 1, m});
  };
  auto backward_input_ok = [&](int r, int st, int m) {
    return state[r].output.count({st, m}) &&
           (st == S - 1 || state[r].received_grad.count({st, m}) || state[r].input_grad.count({st + 1, m}));
  };

  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < R; ++r) {
      while (cursor[r] < s.actions[r].size()) {
        const Action& a = s.actions[r][cursor[r]];
        const int st = a.stage, m = a.microbatch;
        RankState& me = state[r];
        bool blocked = false;
        switch (a.type) {
          case ActionType::Forward:
            if (!forward_input_ok(r, st, m)) return where(r) + ": input not here";
            me.output.insert({st, m});
            break;
          case ActionType::Backward:
          case ActionType::BackwardInput:
            if (!backward_input_ok(r, st, m)) return where(r) + ": activation or gradient not here";
            me.input_grad.insert({st, m});
            if (a.type == ActionType::BackwardInput) me.deferred.insert({st, m});
            break;
          case ActionType::BackwardWeight:
            if (!me.deferred.erase({st, m})) return where(r) + ": no deferred weight gradients";
            break;
          case ActionType::Overlapped:
            if (!forward_input_ok(r, st, m)) return where(r) + ": forward input not here";
            if (!backward_input_ok(r, a.bwd_stage, a.bwd_microbatch)) return where(r) + ": backward input not here";
            me.output.insert({st, m});
            me.input_grad.insert({a.bwd_stage, a.bwd_microbatch});
            break;
          case ActionType::SendForward:
            if (!me.output.count({st, m})) return where(r) + ": sends an output it does not have";
            if (a.peer < 0 || a.peer >= R) return where(r) + ": bad peer";
            mailbox[a.peer].insert({'F', st + 1, m, r});
            break;
          case ActionType::SendBackward:
            if (!me.input_grad.count({st, m})) return where(r) + ": sends a gradient it does not have";
            if (a.peer < 0 || a.peer >= R) return where(r) + ": bad peer";
            mailbox[a.peer].insert({'B', st - 1, m, r});
            break;
          case ActionType::RecvForward:
          case ActionType::RecvBackward: {
            const char kind = a.type == ActionType::RecvForward ? 'F' : 'B';
            const auto it = mailbox[r].find({kind, st, m, a.peer});
            if (it == mailbox[r].end()) {
              blocked = true;
            } else {
              mailbox[r].erase(it);
              (kind == 'F' ? me.received_input : me.received_grad).insert({st, m});
            }
            break;
          }
          case ActionType::Unshard:
          case ActionType::Reshard:
          case ActionType::ReduceGrad: break;  // not in a schedule lowered for communication alone
        }
        if (blocked) break;
        ++cursor[r];
        progress = true;
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    if (cursor[r] < s.actions[r].size()) return where(r) + ": blocked forever (deadlock)";
    if (!mailbox[r].empty()) return "rank " + std::to_string(r) + ": unreceived messages left";
    if (!state[r].deferred.empty()) return "rank " + std::to_string(r) + ": deferred weights never run";
  }
  return "";
}

TEST(LowerExecutor, RunsEveryLoweredScheduleToCompletion) {
  int checked = 0;
  const auto counts = [](int R) { return std::vector<int>{1, R, 2 * R, 2 * R + 1, 4 * R}; };
  for (const auto& [name, R, M, s] : test::grid_schedules(counts)) {
    EXPECT_EQ(execute(lower_communication(s)), "")
        << name << " R=" << R << " M=" << M << "\n" << format_text(lower_communication(s));
    ++checked;
  }
  EXPECT_GT(checked, 40);
}

TEST(LowerExecutor, CatchesWhatLoweringPrevents) {
  // The executor is not trivially satisfied: without communication, rank 0 (run first) reaches 0B0 and the
  // gradient from rank 1 is not there.
  const Schedule compute = make_1f1b(ScheduleOptions{2, 2});
  EXPECT_TRUE(contains(execute(compute), "rank 0 at 0B0 (position 2): activation or gradient not here"))
      << execute(compute);

  // Dropping one RECV leaves a message behind and a compute action without its input.
  Schedule lowered = lower_communication(compute);
  lowered.actions[1].erase(lowered.actions[1].begin());  // 1RECV_F0
  EXPECT_TRUE(contains(execute(lowered), "1F0")) << execute(lowered);

  // A RECV moved before the SEND it transitively depends on: deadlock.
  Schedule stuck = parse_text(
      "rank 0: 0F0 0RECV_B0 0SEND_F0 0F1 0SEND_F1 0B0 0RECV_B1 0B1\n"
      "rank 1: 1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1\n");
  EXPECT_TRUE(contains(execute(stuck), "deadlock")) << execute(stuck);
}

}  // namespace
}  // namespace dualpipe
