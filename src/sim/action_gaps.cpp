#include "action_gaps.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "dualpipe/util/median.h"

namespace dualpipe {
namespace {

struct Span {
  double start, end;
};

// The value below which a quarter of the sorted values lie (nearest rank).
double lower_quartile(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[static_cast<std::size_t>(std::floor(0.25 * static_cast<double>(values.size() - 1)))];
}

std::vector<double> gaps_of(const KinetoSummary& summary, const std::function<bool(const std::string&)>& is_action) {
  if (summary.processes > 1) return {};  // their occurrences are not one timeline
  std::vector<Span> actions, steps;
  for (const KinetoRegion& region : summary.regions) {
    const bool step = region.name == "ProfilerStep";
    if (!step && !is_action(region.name)) continue;
    for (std::size_t i = 0; i < region.starts.size(); ++i)
      (step ? steps : actions).push_back({region.starts[i], region.starts[i] + region.durations[i]});
  }
  const auto by_start = [](const Span& a, const Span& b) { return a.start < b.start; };
  std::sort(actions.begin(), actions.end(), by_start);
  std::sort(steps.begin(), steps.end(), by_start);
  // The step an action starts in (-1: outside every one), so that a gap never spans the work between steps.
  const auto step_of = [&](double t) {
    for (std::size_t s = 0; s < steps.size(); ++s)
      if (t >= steps[s].start && t < steps[s].end) return static_cast<int>(s);
    return -1;
  };
  std::vector<double> gaps;
  double end = -1;
  int step = -2;
  for (const Span& a : actions) {
    if (a.start < end) {  // inside the previous one (a phase within its pair): not an action of its own
      end = std::max(end, a.end);
      continue;
    }
    const int here = steps.empty() ? 0 : step_of(a.start);
    if (here >= 0 && here == step) gaps.push_back(a.start - end);
    end = a.end, step = here;
  }
  return gaps;
}

}  // namespace

std::optional<double> host_gap_between_actions(const std::vector<const KinetoSummary*>& ranks,
                                               const std::function<bool(const std::string&)>& is_action) {
  std::vector<double> per_rank;
  for (const KinetoSummary* summary : ranks) {
    const std::vector<double> gaps = gaps_of(*summary, is_action);
    if (!gaps.empty()) per_rank.push_back(lower_quartile(gaps));
  }
  if (per_rank.empty()) return std::nullopt;
  return median(std::move(per_rank));
}

}  // namespace dualpipe
