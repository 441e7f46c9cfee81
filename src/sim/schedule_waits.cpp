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

std::optional<MeanWait> mean_of(const std::vector<double>& waits) {
  if (waits.empty()) return std::nullopt;
  return MeanWait{std::accumulate(waits.begin(), waits.end(), 0.0) / static_cast<double>(waits.size()),
                  static_cast<int>(waits.size())};
}

}  // namespace

ScheduleWaits schedule_waits(const TimedSteps& steps, int stages, const WaitPart& message_part) {
  ScheduleWaits out;
  std::vector<double> gaps, messages;
  for (const std::vector<std::vector<TimedAction>>& step : steps) {
    ++out.steps;
    std::map<Product, Produced> made;
    for (int r = 0; r < static_cast<int>(step.size()); ++r)
      for (const TimedAction& t : step[r]) add_products(t.action, r, t.end, made);
    for (int r = 0; r < static_cast<int>(step.size()); ++r)
      for (std::size_t i = 0; i < step[r].size(); ++i) {
        const Produced* latest = nullptr;
        for (const Product& p : inputs_of(step[r][i].action, stages)) {
          const auto it = made.find(p);
          if (it != made.end() && (!latest || it->second.end > latest->end)) latest = &it->second;
        }
        const double previous_end = i == 0 ? -std::numeric_limits<double>::infinity() : step[r][i - 1].end;
        if (latest && latest->end > previous_end) {
          // Idle since its previous action: waiting for this input, which a local one cannot be.
          const double start = latest->end, end = step[r][i].start;
          if (latest->rank != r) messages.push_back(message_part ? message_part(start, end) : end - start);
        } else if (i > 0) {
          gaps.push_back(step[r][i].start - previous_end);
        }
      }
  }
  out.gap = mean_of(gaps);
  out.message = mean_of(messages);
  return out;
}

namespace {

// The steps of one pipeline's traces (`ranks[r]` its rank r's) whose compute regions match the schedule's actions.
void add_matching_steps(const std::vector<std::vector<Action>>& compute, const KinetoSummary* const* ranks,
                        const double* clock_offsets, TimedSteps& steps) {
  const int R = static_cast<int>(compute.size());
  const auto is_action = [](const std::string& name) { return name.find(" stage ") != std::string::npos; };
  std::vector<std::vector<std::vector<ActionSpan>>> regions(R);  // [rank][step]
  std::size_t common = std::numeric_limits<std::size_t>::max();
  for (int r = 0; r < R; ++r) {
    regions[r] = steps_of(*ranks[r], is_action);
    common = std::min(common, regions[r].size());
  }
  for (std::size_t k = 0; k < common; ++k) {
    std::vector<std::vector<TimedAction>> step(R);
    bool matches = true;
    for (int r = 0; r < R && matches; ++r) {
      const std::vector<ActionSpan> top = top_level(regions[r][k]);
      matches = top.size() == compute[r].size();
      for (std::size_t i = 0; matches && i < top.size(); ++i) {
        matches = top[i].name == profiler_region(compute[r][i]);
        step[r].push_back({compute[r][i], top[i].start + clock_offsets[r], top[i].end + clock_offsets[r]});
      }
    }
    if (matches) steps.push_back(std::move(step));
  }
}

}  // namespace

ScheduleWaits schedule_waits(const Schedule& schedule, const std::vector<const KinetoSummary*>& ranks,
                             const std::vector<double>& clock_offsets, const WaitPart& message_part) {
  const int R = schedule.num_ranks;
  if (ranks.empty() || ranks.size() % static_cast<std::size_t>(R) != 0) return {};
  std::vector<std::vector<Action>> compute(R);
  for (int r = 0; r < R; ++r)
    for (const Action& a : schedule.actions[r])
      if (a.is_compute()) compute[r].push_back(a);
  TimedSteps steps;
  for (std::size_t first = 0; first < ranks.size(); first += static_cast<std::size_t>(R))
    add_matching_steps(compute, &ranks[first], &clock_offsets[first], steps);
  return schedule_waits(steps, schedule.num_stages, message_part);
}

ScheduleWaits schedule_waits(const Trace& trace) {
  std::map<int, std::map<int, std::vector<TimedAction>>> by_step;  // step -> rank -> its compute actions
  for (const TraceEvent& e : trace.events)
    if (e.action.is_compute()) by_step[e.step][e.rank].push_back({e.action, e.start, e.start + e.duration});
  TimedSteps steps;
  for (auto& [number, ranks] : by_step) {
    std::vector<std::vector<TimedAction>> step(trace.num_ranks);
    for (auto& [rank, actions] : ranks) {
      if (rank < 0 || rank >= trace.num_ranks) continue;
      std::sort(actions.begin(), actions.end(),
                [](const TimedAction& a, const TimedAction& b) { return a.start < b.start; });
      step[rank] = std::move(actions);
    }
    steps.push_back(std::move(step));
  }
  return schedule_waits(steps, trace.num_stages);
}

}  // namespace dualpipe
