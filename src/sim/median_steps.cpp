#include "median_steps.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "dualpipe/util/median.h"

namespace dualpipe {

namespace {

constexpr double kForever = std::numeric_limits<double>::infinity();

struct Window {
  double start = 0, end = 0;
};

const KinetoRegion* profiler_steps(const KinetoSummary& summary) {
  for (const KinetoRegion& r : summary.regions)
    if (r.name == "ProfilerStep") return &r;
  return nullptr;
}

bool inside(const std::vector<Window>& windows, double t) {
  return std::any_of(windows.begin(), windows.end(), [&](const Window& w) { return t >= w.start && t < w.end; });
}

// The region with only its occurrences that start inside the windows; its count 0 where none does.
KinetoRegion within(const KinetoRegion& region, const std::vector<Window>& windows) {
  KinetoRegion kept = region;
  kept.durations.clear();
  kept.starts.clear();
  for (std::size_t i = 0; i < region.starts.size(); ++i)
    if (inside(windows, region.starts[i])) {
      kept.starts.push_back(region.starts[i]);
      kept.durations.push_back(region.durations[i]);
    }
  kept.count = static_cast<int>(kept.durations.size());
  kept.median_duration = median(kept.durations);
  const double total = std::accumulate(kept.durations.begin(), kept.durations.end(), 0.0);
  kept.mean_duration = kept.count ? total / kept.count : 0;
  return kept;
}

}  // namespace

MedianSteps median_steps(const KinetoRanks& ranks) {
  MedianSteps out{ranks, {}, 0};
  std::vector<const KinetoRegion*> steps;
  for (const KinetoRankSummary& r : ranks.ranks) {
    const KinetoRegion* s = profiler_steps(r.summary);
    if (!s || r.summary.processes > 1 || (!steps.empty() && s->count != steps.front()->count)) return out;
    steps.push_back(s);
  }
  if (steps.empty()) return out;
  const int n = steps.front()->count;
  out.traced = n;
  if (n < 3) return out;

  const std::vector<double>& slowest = steps[ranks.slowest]->durations;
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return slowest[a] < slowest[b]; });
  out.steps = n % 2 ? std::vector<int>{order[n / 2]} : std::vector<int>{order[n / 2 - 1], order[n / 2]};
  std::sort(out.steps.begin(), out.steps.end());

  for (std::size_t r = 0; r < ranks.ranks.size(); ++r) {
    // From a step's start to the next one's, the first from the trace's start and the last to its end: work that a
    // GPU ran after its step's end on the host belongs to that step.
    const std::vector<double>& starts = steps[r]->starts;
    std::vector<Window> windows;
    for (const int s : out.steps)
      windows.push_back({s == 0 ? -kForever : starts[s], s + 1 == n ? kForever : starts[s + 1]});
    KinetoRankSummary& kept = out.ranks.ranks[r];
    kept.summary.regions.clear();
    for (const KinetoRegion& region : ranks.ranks[r].summary.regions) {
      KinetoRegion cut = within(region, windows);
      if (cut.count > 0) kept.summary.regions.push_back(std::move(cut));
    }
    kept.collectives.clear();
    for (const CollectiveSpan& c : ranks.ranks[r].collectives)
      if (inside(windows, c.start)) kept.collectives.push_back(c);
  }
  return out;
}

}  // namespace dualpipe
