// Ranks that computed on the CPU of one machine with fewer cores than ranks slowed one another: a region's
// duration in their profiler traces is its work stretched by the others computing at the same time. Internal to
// `plan --from-kineto` (kineto_plan.cpp), which reads the costs as each action alone on a core and simulates the
// run with the cores shared (shared_cores.h).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dualpipe/trace/kineto_ranks.h"

namespace dualpipe {

struct SharedHost {
  std::string host;
  int cores = 0;              // the cores its ranks could run on (dualpipe.host_cores)
  int ranks = 0;              // the ranks that ran on it
  double mean_slowdown = 1;   // of the work regions' occurrences: their time over their time alone, summed
  std::vector<KinetoSummary> alone;  // each rank's summary with its work regions as they would have run alone
  std::map<double, int> working;     // how many ranks worked, over time on the host's clock (concurrency)
};

// Where every rank recorded one host and more ranks ran there than it had cores: each occurrence of a region
// `is_work` names, on each rank, divided by its slowdown, the time over the work done at each moment's rate
// min(1, cores / ranks working), a rank working while any of its work regions is open (on one clock: the host's).
// The medians, means and compute of those regions follow. None otherwise (a device per rank, no record of the
// host, or several hosts; `several_hosts` says which).
std::optional<SharedHost> shared_host(const KinetoRanks& ranks, const std::function<bool(const std::string&)>& is_work,
                                      bool* several_hosts = nullptr);

}  // namespace dualpipe
