#include "expert_timeline.h"

#include <algorithm>
#include <iterator>
#include <map>

#include "dualpipe/runtime/gather.h"

namespace dualpipe::train {

void ExpertTimeline::exchange(const std::string& what, Time start, Time waited_from, Time end) {
  const std::lock_guard<std::mutex> lock(mutex_);
  const std::thread::id thread = std::this_thread::get_id();
  exchanges_.push_back({thread, start, end});
  waits_.push_back({thread, waited_from, end});
  // On one thread (the phases) a backward's exchanges still get the second track: they overlap the forward's.
  const bool backward = thread != main_thread_ || what.find("backward") != std::string::npos;
  step_exchanges_.push_back({what, backward, start, waited_from, end});
}

void ExpertTimeline::halves(const runtime::OverlapHalves& h) {
  const std::lock_guard<std::mutex> lock(mutex_);
  halves_.push_back({h.forward_thread, h.forward_start, h.forward_end});
  halves_.push_back({h.backward_thread, h.backward_start, h.backward_end});
}

void ExpertTimeline::discard() {
  const std::lock_guard<std::mutex> lock(mutex_);
  exchanges_.clear();
  waits_.clear();
  halves_.clear();
  step_exchanges_.clear();
}

ExpertTimeline::StepTotals ExpertTimeline::finish_step(const std::vector<Span>& main_thread_actions, int step) {
  const std::lock_guard<std::mutex> lock(mutex_);
  // A sweep over the spans' ends: per thread, how many activity spans and how many waits cover the instant, and
  // how many exchanges are under way.
  enum Kind { kActivity, kWait, kUnderWay };
  struct Edge {
    Time at;
    int delta;
    Kind kind;
    std::thread::id thread;
  };
  std::vector<Edge> edges;
  auto add = [&](const Span& s, Kind kind) {
    edges.push_back({s.start, +1, kind, s.thread});
    edges.push_back({s.end, -1, kind, s.thread});
  };
  for (const Span& s : main_thread_actions) add(s, kActivity);
  for (const Span& s : halves_) add(s, kActivity);
  for (const Span& s : waits_) add(s, kWait);
  for (const Span& s : exchanges_) add(s, kUnderWay);
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.at < b.at; });
  std::map<std::thread::id, std::pair<int, int>> open;  // thread -> (activity spans, waits)
  int under_way = 0;
  StepTotals totals;
  for (const Span& s : exchanges_) totals.all_to_all_ms += std::chrono::duration<double, std::milli>(s.end - s.start).count();
  for (size_t i = 0; i + 1 < edges.size(); ++i) {
    if (edges[i].kind == kUnderWay) {
      under_way += edges[i].delta;
    } else {
      auto& [active, waiting] = open[edges[i].thread];
      (edges[i].kind == kWait ? waiting : active) += edges[i].delta;
    }
    const auto gap = edges[i + 1].at - edges[i].at;
    if (gap.count() <= 0) continue;
    const bool exchanging = under_way > 0;
    bool computing = false;
    for (const auto& [thread, counts] : open) computing |= counts.first > 0 && counts.second == 0;
    if (exchanging && !computing) totals.exposed_ms += std::chrono::duration<double, std::milli>(gap).count();
  }
  exchanges_.clear();
  waits_.clear();
  halves_.clear();
  for (Exchange& e : step_exchanges_) e.step = step;
  kept_.insert(kept_.end(), step_exchanges_.begin(), step_exchanges_.end());
  step_exchanges_.clear();
  return totals;
}

// Sent as 6 doubles per exchange: aligned start and duration in microseconds, the name's index, the track, the step,
// and the microseconds from the start to the wait.
std::vector<TraceSpan> gather_all_to_all_spans(const ExpertTimeline& timeline, comm::Communicator& communicator,
                                               const runtime::ClockSync& clock, int tag,
                                               std::chrono::milliseconds timeout) {
  static const char* const kNames[] = {"dispatch", "combine", "dispatch backward", "combine backward"};
  const auto& exchanges = timeline.exchanges();
  constexpr int64_t kFields = 6;
  torch::Tensor local = torch::zeros({static_cast<int64_t>(exchanges.size()) * kFields}, torch::kDouble);
  double* v = local.data_ptr<double>();
  for (const ExpertTimeline::Exchange& e : exchanges) {
    *v++ = clock.to_aligned_us(e.start);
    *v++ = std::chrono::duration<double, std::micro>(e.end - e.start).count();
    *v++ = static_cast<double>(std::find(std::begin(kNames), std::end(kNames), e.what) - std::begin(kNames));
    *v++ = e.backward_thread ? 1 : 0;
    *v++ = e.step;
    *v++ = std::chrono::duration<double, std::micro>(e.waited_from - e.start).count();
  }
  std::vector<TraceSpan> spans;
  const auto gathered = runtime::gather_to_root(communicator, local, tag, timeout);
  for (size_t rank = 0; rank < gathered.size(); ++rank) {
    const double* g = gathered[rank].data_ptr<double>();
    for (int64_t i = 0; i + kFields <= gathered[rank].numel(); i += kFields, g += kFields) {
      const auto name = static_cast<size_t>(g[2]);
      spans.push_back({name < std::size(kNames) ? kNames[name] : "all-to-all", static_cast<int>(rank),
                       static_cast<int>(g[3]), static_cast<int>(g[4]), g[0], g[1], std::min(g[5], g[1])});
    }
  }
  return spans;
}

}  // namespace dualpipe::train
