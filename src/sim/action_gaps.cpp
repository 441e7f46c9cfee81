#include "action_gaps.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "dualpipe/util/median.h"

namespace dualpipe {
namespace {

constexpr double kResolution = 1e-3;  // microseconds

// The value below which a quarter of the sorted values lie (nearest rank).
double lower_quartile(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[static_cast<std::size_t>(std::floor(0.25 * static_cast<double>(values.size() - 1)))];
}

void add_gaps(std::vector<ActionSpan> actions, std::vector<double>& gaps) {
  const std::vector<ActionSpan> top = top_level(std::move(actions));
  for (std::size_t i = 1; i < top.size(); ++i) gaps.push_back(top[i].start - top[i - 1].end);
}

}  // namespace

std::vector<ActionSpan> top_level(std::vector<ActionSpan> spans) {
  std::sort(spans.begin(), spans.end(), [](const ActionSpan& a, const ActionSpan& b) { return a.start < b.start; });
  std::vector<ActionSpan> top;
  for (ActionSpan& s : spans) {
    // One that starts within a nanosecond (the traces' resolution) of the last one's end follows it: an end
    // summed from a start and a duration may land a rounding error after the next start.
    if (top.empty() || s.start >= top.back().end - kResolution) top.push_back(std::move(s));
    else top.back().end = std::max(top.back().end, s.end);  // inside it: not an action of its own
  }
  return top;
}

std::vector<std::vector<ActionSpan>> steps_of(const KinetoSummary& summary,
                                              const std::function<bool(const std::string&)>& is_action) {
  if (summary.processes > 1) return {};
  std::vector<ActionSpan> actions, steps;
  for (const KinetoRegion& region : summary.regions) {
    const bool step = region.name == "ProfilerStep";
    if (!step && !is_action(region.name)) continue;
    for (std::size_t i = 0; i < region.starts.size(); ++i)
      (step ? steps : actions).push_back({region.starts[i], region.starts[i] + region.durations[i], region.name});
  }
  if (steps.empty()) return {actions};
  std::vector<std::vector<ActionSpan>> out(steps.size());
  for (const ActionSpan& a : actions)
    for (std::size_t s = 0; s < steps.size(); ++s)
      if (a.start >= steps[s].start && a.start < steps[s].end) {
        out[s].push_back(a);
        break;
      }
  return out;
}

std::optional<double> host_gap_between_actions(const StepActions& actions) {
  std::vector<double> per_rank;
  for (const auto& steps : actions) {
    std::vector<double> gaps;
    for (const std::vector<ActionSpan>& step : steps) add_gaps(step, gaps);
    if (!gaps.empty()) per_rank.push_back(lower_quartile(std::move(gaps)));
  }
  if (per_rank.empty()) return std::nullopt;
  return median(std::move(per_rank));
}

std::optional<double> host_gap_between_actions(const std::vector<const KinetoSummary*>& ranks,
                                               const std::function<bool(const std::string&)>& is_action) {
  StepActions actions;
  for (const KinetoSummary* summary : ranks) actions.push_back(steps_of(*summary, is_action));
  return host_gap_between_actions(actions);
}

}  // namespace dualpipe
