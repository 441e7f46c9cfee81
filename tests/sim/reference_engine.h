// An independent timing engine for the simulator tests: times a compute-only schedule by the rules of
// spec section 2 without the library's event table (sweep the ranks repeatedly; run each rank's next action
// once everything it needs has an end time). Durations come from the cost parameters directly.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "dualpipe/schedule/dependency_walk.h"
#include "dualpipe/schedule/schedule.h"
#include "dualpipe/sim/cost_model.h"
#include "test_helpers.h"

namespace dualpipe::test {

// I = B - W; a pair costs FB scaled by its halves' stage multipliers relative to F + B, or F + B when FB
// is unset; latency `comm` on every dependency whose producer ran on another rank.
struct ReferenceEngine {
  const Schedule& s;
  const CostModel& c;
  std::map<std::tuple<char, int, int>, std::pair<double, int>> done;  // (F|G|I, stage, mb) -> (end, rank)

  double duration(const Action& a) const { return expected_duration(c, a); }

  // The time the action may start on rank r given its dependencies, or -1 when one is not done yet.
  double ready(const Action& a, int r) const {
    double t = 0;
    auto need = [&](char what, int stage, int m) {
      const auto it = done.find({what, stage, m});
      if (it == done.end()) return false;
      t = std::max(t, it->second.first + (it->second.second != r ? c.comm : 0.0));
      return true;
    };
    auto forward_ok = [&](int st, int m) { return st == 0 || need('F', st - 1, m); };
    auto backward_ok = [&](int st, int m) {
      return need('F', st, m) && (st == s.num_stages - 1 || need('G', st + 1, m));
    };
    bool ok = true;
    switch (a.type) {
      case ActionType::Forward: ok = forward_ok(a.stage, a.microbatch); break;
      case ActionType::Backward:
      case ActionType::BackwardInput: ok = backward_ok(a.stage, a.microbatch); break;
      case ActionType::BackwardWeight: ok = need('I', a.stage, a.microbatch); break;
      case ActionType::Overlapped:
        ok = forward_ok(a.stage, a.microbatch) && backward_ok(a.bwd_stage, a.bwd_microbatch);
        break;
      default: break;
    }
    return ok ? t : -1;
  }

  std::vector<std::vector<ActionTime>> run() {
    const int R = s.num_ranks;
    std::vector<std::vector<ActionTime>> times(R);
    std::vector<double> clock(R, 0);
    std::vector<std::size_t> next(R, 0);
    for (bool moved = true; moved;) {
      moved = false;
      for (int r = 0; r < R; ++r) {
        while (next[r] < s.actions[r].size()) {
          const Action& a = s.actions[r][next[r]];
          const double t = ready(a, r);
          if (t < 0) break;
          const double start = std::max(clock[r], t), end = start + duration(a);
          times[r].push_back({start, end});
          clock[r] = end;
          if (a.type == ActionType::Forward || a.type == ActionType::Overlapped) {
            done[{'F', a.stage, a.microbatch}] = {end, r};
          }
          if (a.type == ActionType::Backward || a.type == ActionType::BackwardInput) {
            done[{'G', a.stage, a.microbatch}] = {end, r};
          }
          if (a.type == ActionType::BackwardInput) done[{'I', a.stage, a.microbatch}] = {end, r};
          if (a.type == ActionType::Overlapped) done[{'G', a.bwd_stage, a.bwd_microbatch}] = {end, r};
          ++next[r];
          moved = true;
        }
      }
    }
    for (int r = 0; r < R; ++r) EXPECT_EQ(next[r], s.actions[r].size()) << "reference engine stuck on rank " << r;
    return times;
  }
};

// The bubble (max over ranks of idle) of the reference engine's timeline.
inline double reference_bubble(const Schedule& s, const CostModel& c) {
  const auto times = ReferenceEngine{s, c, {}}.run();
  double first = 1e300, last = -1e300;
  std::vector<double> busy;
  for (const auto& rank : times) {
    double b = 0;
    for (const ActionTime& t : rank) b += t.end - t.start;
    busy.push_back(b);
    if (!rank.empty()) first = std::min(first, rank.front().start), last = std::max(last, rank.back().end);
  }
  return last - first - *std::min_element(busy.begin(), busy.end());
}

}  // namespace dualpipe::test
