#include "kineto_shared_cores.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "dualpipe/sim/shared_cores.h"
#include "dualpipe/util/median.h"

namespace dualpipe {

namespace {

// A rank's work as intervals that do not overlap: its work regions' occurrences merged where they nest or touch.
std::vector<ActionTime> busy_intervals(const KinetoSummary& summary,
                                       const std::function<bool(const std::string&)>& is_work) {
  std::vector<ActionTime> spans;
  for (const KinetoRegion& r : summary.regions)
    if (is_work(r.name))
      for (std::size_t i = 0; i < r.starts.size(); ++i) spans.push_back({r.starts[i], r.starts[i] + r.durations[i]});
  std::sort(spans.begin(), spans.end(), [](const ActionTime& a, const ActionTime& b) { return a.start < b.start; });
  std::vector<ActionTime> merged;
  for (const ActionTime& s : spans)
    if (!merged.empty() && s.start <= merged.back().end) merged.back().end = std::max(merged.back().end, s.end);
    else merged.push_back(s);
  return merged;
}

}  // namespace

std::optional<SharedHost> shared_host(const KinetoRanks& ranks, const std::function<bool(const std::string&)>& is_work,
                                      bool* several_hosts) {
  if (several_hosts) *several_hosts = false;
  std::map<std::string, int> ranks_on;
  for (const KinetoRankSummary& r : ranks.ranks) {
    if (r.host.empty() || r.host_cores <= 0) return std::nullopt;
    ++ranks_on[r.host];
  }
  if (ranks_on.size() != 1) {
    if (several_hosts) *several_hosts = true;
    return std::nullopt;
  }
  SharedHost shared;
  shared.host = ranks_on.begin()->first;
  shared.ranks = static_cast<int>(ranks.ranks.size());
  shared.cores = ranks.ranks.front().host_cores;
  for (const KinetoRankSummary& r : ranks.ranks) shared.cores = std::min(shared.cores, r.host_cores);
  if (shared.ranks <= shared.cores) return std::nullopt;

  std::vector<std::vector<ActionTime>> busy;
  for (const KinetoRankSummary& r : ranks.ranks) busy.push_back(busy_intervals(r.summary, is_work));
  shared.working = concurrency(busy);
  const std::map<double, int>& level = shared.working;
  double stretched = 0, alone = 0;
  for (const KinetoRankSummary& r : ranks.ranks) {
    KinetoSummary summary = r.summary;
    for (KinetoRegion& region : summary.regions) {
      if (!is_work(region.name) || region.durations.empty()) continue;
      const double before = std::accumulate(region.durations.begin(), region.durations.end(), 0.0);
      for (std::size_t i = 0; i < region.durations.size(); ++i)
        region.durations[i] /= mean_slowdown(level, region.starts[i], region.starts[i] + region.durations[i], 1,
                                             shared.cores);
      const double after = std::accumulate(region.durations.begin(), region.durations.end(), 0.0);
      region.median_duration = median(region.durations);
      region.mean_duration = after / region.durations.size();
      // The operators inside ran on the same stretched core.
      if (before > 0) region.mean_compute *= after / before;
      stretched += before, alone += after;
    }
    shared.alone.push_back(std::move(summary));
  }
  shared.mean_slowdown = alone > 0 ? stretched / alone : 1;
  return shared;
}

}  // namespace dualpipe
