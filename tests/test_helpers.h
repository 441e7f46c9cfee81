// Small helpers shared by the schedule and simulator tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dualpipe/action.h"
#include "dualpipe/error.h"
#include "dualpipe/generators.h"
#include "dualpipe/schedule.h"

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

inline ScheduleOptions options(int R, int M, int stages_per_rank = 0) {
  ScheduleOptions o;
  o.num_ranks = R;
  o.num_microbatches = M;
  o.stages_per_rank = stages_per_rank;
  return o;
}

// The generator rejects the options with InvalidArgument whose message names the rule.
inline void expect_invalid(GeneratorFn make, const ScheduleOptions& o, const std::string& rule) {
  const std::string message = error_message([&] { make(o); });
  EXPECT_TRUE(contains(message, rule)) << "expected '" << rule << "' in: " << message;
}

}  // namespace dualpipe::test
