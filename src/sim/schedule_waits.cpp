#include "schedule_waits.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>

#include "action_gaps.h"

namespace dualpipe {

namespace {

// A produced input: a stage's forward output or input gradient for a micro-batch.
using Product = std::tuple<bool /*gradient*/, int /*stage*/, int /*micro-batch*/>;

struct Produced {
  int rank = 0;
  double end = 0;
};

void add_products(const Action& a, int rank, double end, std::map<Product, Produced>& made) {
  switch (a.type) {
    case ActionType::Forward: made[{false, a.stage, a.microbatch}] = {rank, end}; break;
    case ActionType::Backward:
    case ActionType::BackwardInput: made[{true, a.stage, a.microbatch}] = {rank, end}; break;
    case ActionType::Overlapped:
      made[{false, a.stage, a.microbatch}] = {rank, end};
      made[{true, a.bwd_stage, a.bwd_microbatch}] = {rank, end};
      break;
    default: break;
  }
}

// The inputs an action waits for (spec section 2); W's comes from its own rank.
std::vector<Product> inputs_of(const Action& a, int stages) {
  std::vector<Product> needs;
  const auto forward = [&](int s, int m) {
    if (s > 0) needs.push_back({false, s - 1, m});
  };
  const auto backward = [&](int s, int m) {
    needs.push_back({false, s, m});
    if (s + 1 < stages) needs.push_back({true, s + 1, m});
  };
  switch (a.type) {
    case ActionType::Forward: forward(a.stage, a.microbatch); break;
    case ActionType::Backward:
    case ActionType::BackwardInput: backward(a.stage, a.microbatch); break;
    case ActionType::Overlapped:
      forward(a.stage, a.microbatch);
      backward(a.bwd_stage, a.bwd_microbatch);
      break;
    default: break;
  }
  return needs;
}

// Each rank's top-level actions of one step in time order (a region starting inside another is a part of it).
std::vector<ActionSpan> top_level(std::vector<ActionSpan> spans) {
  std::sort(spans.begin(), spans.end(), [](const ActionSpan& a, const ActionSpan& b) { return a.start < b.start; });
  std::vector<ActionSpan> top;
  for (ActionSpan& s : spans)
    if (top.empty() || s.start >= top.back().end) top.push_back(std::move(s));
  return top;
}

std::optional<MeanWait> mean_of(const std::vector<double>& waits) {
  if (waits.empty()) return std::nullopt;
  return MeanWait{std::accumulate(waits.begin(), waits.end(), 0.0) / static_cast<double>(waits.size()),
                  static_cast<int>(waits.size())};
}

}  // namespace

ScheduleWaits schedule_waits(const Schedule& schedule, const std::vector<const KinetoSummary*>& ranks,
                             const std::vector<double>& clock_offsets) {
  ScheduleWaits out;
  const int R = schedule.num_ranks;
  if (static_cast<int>(ranks.size()) != R) return out;
  std::vector<std::vector<Action>> compute(R);
  for (int r = 0; r < R; ++r)
    for (const Action& a : schedule.actions[r])
      if (a.is_compute()) compute[r].push_back(a);
  const auto is_action = [](const std::string& name) { return name.find(" stage ") != std::string::npos; };
  std::vector<std::vector<std::vector<ActionSpan>>> steps(R);  // [rank][step]
  std::size_t common = std::numeric_limits<std::size_t>::max();
  for (int r = 0; r < R; ++r) {
    steps[r] = steps_of(*ranks[r], is_action);
    common = std::min(common, steps[r].size());
  }
  std::vector<double> gaps, messages;
  for (std::size_t k = 0; k < common; ++k) {
    std::vector<std::vector<ActionSpan>> timed(R);
    bool matches = true;
    for (int r = 0; r < R && matches; ++r) {
      timed[r] = top_level(steps[r][k]);
      matches = timed[r].size() == compute[r].size();
      for (std::size_t i = 0; matches && i < compute[r].size(); ++i)
        matches = timed[r][i].name == profiler_region(compute[r][i]);
      for (ActionSpan& span : timed[r]) span.start += clock_offsets[r], span.end += clock_offsets[r];
    }
    if (!matches) continue;
    ++out.steps;
    std::map<Product, Produced> made;
    for (int r = 0; r < R; ++r)
      for (std::size_t i = 0; i < compute[r].size(); ++i) add_products(compute[r][i], r, timed[r][i].end, made);
    for (int r = 0; r < R; ++r)
      for (std::size_t i = 0; i < compute[r].size(); ++i) {
        const Produced* latest = nullptr;
        for (const Product& p : inputs_of(compute[r][i], schedule.num_stages)) {
          const auto it = made.find(p);
          if (it != made.end() && (!latest || it->second.end > latest->end)) latest = &it->second;
        }
        const double start = timed[r][i].start;
        const double previous_end = i == 0 ? -std::numeric_limits<double>::infinity() : timed[r][i - 1].end;
        if (latest && latest->end > previous_end) {
          // Idle since its previous action: waiting for this input, which a local one cannot be.
          if (latest->rank != r) messages.push_back(start - latest->end);
        } else if (i > 0) {
          gaps.push_back(start - previous_end);
        }
      }
  }
  out.gap = mean_of(gaps);
  out.message = mean_of(messages);
  return out;
}

}  // namespace dualpipe
