// The parameters of the runtime tests that run every schedule kind: a kind and a rank count, with M = 2R
// micro-batches, which every generator accepts (M >= 2R, M a multiple of R, M even).
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/schedule.h"

namespace dualpipe::testing {

struct KindCase {
  std::string kind;
  int ranks;
};

inline void PrintTo(const KindCase& c, std::ostream* out) { *out << c.kind << " R=" << c.ranks; }

// "interleaved_1f1b_R4": a test name GoogleTest accepts.
inline std::string case_name(const ::testing::TestParamInfo<KindCase>& info) {
  std::string name = info.param.kind + "_R" + std::to_string(info.param.ranks);
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}

// Every generator's kind at R in {2, 4}.
inline std::vector<KindCase> all_kind_cases() {
  std::vector<KindCase> cases;
  for (const GeneratorInfo& g : generators())
    for (int r : {2, 4}) cases.push_back({std::string(g.name), r});
  return cases;
}

inline Schedule make_case_schedule(const std::string& kind, int ranks) {
  ScheduleOptions options;
  options.num_ranks = ranks;
  options.num_microbatches = 2 * ranks;
  return make_schedule(kind, options);
}

}  // namespace dualpipe::testing
