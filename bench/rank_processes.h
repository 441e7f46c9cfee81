// Multi-process benchmarks run their own ranks: the program started by the user spawns R copies of itself with
// torchrun-style RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (a free local port) and waits for them; each copy
// sees RANK set and runs one rank. Ranks that outlive the limit are killed, so a hang never leaves processes.
// The spawning is the runtime tests' (tests/runtime/support/rank_processes.h).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/support/rank_processes.h"

namespace dualpipe::bench {

inline bool is_rank_process() { return std::getenv("RANK") != nullptr; }

// Runs `ranks` copies of /proc/self/exe with `args`; returns 0 when all exit 0, 124 when some were still running
// at `limit` (and were killed), else the first failing rank's status.
inline int run_rank_processes(int ranks, const std::vector<std::string>& args, std::chrono::seconds limit) {
  const std::vector<int> codes = dualpipe::testing::run_rank_processes("/proc/self/exe", ranks, args, limit);
  if (std::find(codes.begin(), codes.end(), -1) != codes.end()) {
    std::fprintf(stderr, "ranks still running after %lld s: killed\n", static_cast<long long>(limit.count()));
    return 124;
  }
  for (int code : codes)
    if (code != 0) return code;
  return 0;
}

// Median and 90th percentile of a sample (sorted copy).
struct Summary {
  double median = 0, p90 = 0, min = 0;
};
inline Summary summarize(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  s.p90 = v[std::min(v.size() - 1, static_cast<size_t>(0.9 * static_cast<double>(v.size())))];
  return s;
}

}  // namespace dualpipe::bench
