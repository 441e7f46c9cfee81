// Small helpers shared by the core's tests (schedule, simulator, layout, pictures, data).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "dualpipe/schedule/action.h"
#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/schedule.h"
#include "dualpipe/sim/cost_model.h"
#include "dualpipe/util/error.h"

namespace dualpipe::test {

// Runs fn and returns the message of the exception of type E it throws; records a failure (and returns "")
// when it throws nothing or something else.
template <typename E = InvalidArgument, typename Fn>
std::string error_message(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected a different exception type, got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected an exception, none was thrown";
  return "";
}

// One rank's actions written in the canonical text form, separated by single spaces.
inline std::string join(const std::vector<Action>& actions) {
  std::string out;
  for (const Action& a : actions) {
    if (!out.empty()) out += ' ';
    out += to_string(a);
  }
  return out;
}

// Problems joined into one string for readable assertion output.
inline std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Every one of `parts` is in `text`; a failure shows the part and the whole text.
inline void expect_contains_all(const std::string& text, const std::vector<std::string>& parts) {
  for (const std::string& part : parts) EXPECT_TRUE(contains(text, part)) << "expected '" << part << "' in: " << text;
}

// fn throws E, and its message holds every one of `parts`.
template <typename E = InvalidArgument, typename Fn>
void expect_error_with(Fn&& fn, const std::vector<std::string>& parts) {
  expect_contains_all(error_message<E>(std::forward<Fn>(fn)), parts);
}

// The message of the InvalidArgument that fn throws, or "(no error)" when it throws none: for tests that also
// check that a good input is accepted, by comparing with "(no error)".
template <typename Fn>
std::string error_text(Fn&& fn) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

inline ScheduleOptions options(int R, int M, int stages_per_rank = 0) {
  ScheduleOptions o;
  o.num_ranks = R;
  o.num_microbatches = M;
  o.stages_per_rank = stages_per_rank;
  return o;
}

// A cost model from its parameters; FB <= 0 leaves the overlapped pair unset (it then costs F + B).
inline CostModel costs(double F, double B, double W, double FB = -1, double comm = 0) {
  CostModel c;
  c.forward = F;
  c.backward = B;
  c.weight = W;
  if (FB > 0) c.overlapped = FB;
  c.comm = comm;
  return c;
}

// A rank's busy time (its compute), idle time (the makespan's rest) and span (its first start to its last end):
// RankMetrics of a simulation and RankFigures of a step alike.
template <typename RankTimes>
void expect_busy_idle_span(const RankTimes& rank, double busy, double idle, double span) {
  EXPECT_DOUBLE_EQ(rank.busy, busy);
  EXPECT_DOUBLE_EQ(rank.idle, idle);
  EXPECT_DOUBLE_EQ(rank.span, span);
}

// One schedule of the grid tests below.
struct GridSchedule {
  std::string name;  // the generator's
  int R = 0, M = 0;
  Schedule schedule;
};

// What every generator makes for R in {1, 2, 3, 4, 6} ranks and M in microbatch_counts(R), generator by
// generator; parameters a generator rejects are left out (they are tested in test_generators_grid.cpp).
template <typename Counts>
std::vector<GridSchedule> grid_schedules(Counts microbatch_counts) {
  std::vector<GridSchedule> grid;
  for (const GeneratorInfo& g : generators()) {
    for (int R : {1, 2, 3, 4, 6}) {
      for (int M : microbatch_counts(R)) {
        try {
          grid.push_back({std::string(g.name), R, M, g.make(ScheduleOptions{R, M})});
        } catch (const InvalidArgument&) {
        }
      }
    }
  }
  return grid;
}

// The generator rejects the options with InvalidArgument whose message names the rule.
inline void expect_invalid(GeneratorFn make, const ScheduleOptions& o, const std::string& rule) {
  const std::string message = error_message([&] { make(o); });
  EXPECT_TRUE(contains(message, rule)) << "expected '" << rule << "' in: " << message;
}

// The duration of a compute action from the cost model's fields, written out by hand as spec section 2 says.
inline double expected_duration(const CostModel& c, const Action& a) {
  const auto k = [&](int stage) {
    return stage < static_cast<int>(c.stage_scale.size()) ? c.stage_scale[stage] : 1.0;
  };
  switch (a.type) {
    case ActionType::Forward: return c.forward * k(a.stage);
    case ActionType::Backward: return c.backward * k(a.stage);
    case ActionType::BackwardInput: return (c.backward - c.weight) * k(a.stage);
    case ActionType::BackwardWeight: return c.weight * k(a.stage);
    case ActionType::Overlapped: {
      const double fb = c.overlapped.value_or(c.forward + c.backward);
      return fb * (c.forward * k(a.stage) + c.backward * k(a.bwd_stage)) / (c.forward + c.backward);
    }
    default: return 0;
  }
}

}  // namespace dualpipe::test
