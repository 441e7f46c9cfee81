#include "dualpipe/schedule/dependency_walk.h"

#include <algorithm>

#include "dualpipe/util/error.h"

namespace dualpipe {
namespace {

// What an action produces or waits for, one flat slot per (event, stage, micro-batch).
enum Event : int {
  kForwardDone = 0,    // sFm finished
  kBackwardDone = 1,   // sBm or sIm finished (input gradients exist)
  kForwardSent = 2,    // SEND_F of sFm issued
  kBackwardSent = 3,   // SEND_B of sBm issued
  kNumEvents = 4,
};

class EventTable {
 public:
  EventTable(int stages, int microbatches)
      : stages_(stages), microbatches_(microbatches),
        time_(static_cast<std::size_t>(kNumEvents) * stages * microbatches, -1.0),
        rank_(time_.size(), -1), waiters_(time_.size(), -1) {}

  int slot(Event e, int stage, int microbatch) const {
    return (static_cast<int>(e) * stages_ + stage) * microbatches_ + microbatch;
  }
  bool done(int slot) const { return rank_[slot] >= 0; }
  double time(int slot) const { return time_[slot]; }
  int rank(int slot) const { return rank_[slot]; }
  void mark(int slot, double time, int rank) {
    time_[slot] = time;
    rank_[slot] = rank;
  }
  // Ranks blocked on a slot form a singly linked list through next_waiter (a rank waits on one slot at a time).
  int& waiters(int slot) { return waiters_[slot]; }

  std::string describe(int slot) const {
    const int e = slot / (stages_ * microbatches_);
    const int s = (slot / microbatches_) % stages_;
    const int m = slot % microbatches_;
    switch (e) {
      case kForwardDone: return detail::concat(s, "F", m);
      case kBackwardDone: return detail::concat(s, "B", m, "/", s, "I", m);
      case kForwardSent: return detail::concat(s, "SEND_F", m);
      default: return detail::concat(s, "SEND_B", m);
    }
  }

 private:
  int stages_;
  int microbatches_;
  std::vector<double> time_;
  std::vector<int> rank_;
  std::vector<int> waiters_;
};

// The slots an action waits for (at most 3) and the slots it produces (at most 2).
struct Edges {
  int needs[3];
  int num_needs = 0;
  int makes[2];
  int num_makes = 0;
  void need(int slot) { needs[num_needs++] = slot; }
  void make(int slot) { makes[num_makes++] = slot; }
};

void forward_edges(const EventTable& t, int S, int s, int m, Edges& e) {
  if (s > 0) e.need(t.slot(kForwardDone, s - 1, m));
  e.make(t.slot(kForwardDone, s, m));
  (void)S;
}

void backward_edges(const EventTable& t, int S, int s, int m, Edges& e) {
  e.need(t.slot(kForwardDone, s, m));
  if (s + 1 < S) e.need(t.slot(kBackwardDone, s + 1, m));
  e.make(t.slot(kBackwardDone, s, m));
}

Edges edges_of(const EventTable& t, int S, const Action& a) {
  Edges e;
  switch (a.type) {
    case ActionType::Forward: forward_edges(t, S, a.stage, a.microbatch, e); break;
    case ActionType::Backward:
    case ActionType::BackwardInput: backward_edges(t, S, a.stage, a.microbatch, e); break;
    case ActionType::BackwardWeight: e.need(t.slot(kBackwardDone, a.stage, a.microbatch)); break;
    case ActionType::Overlapped:
      forward_edges(t, S, a.stage, a.microbatch, e);
      backward_edges(t, S, a.bwd_stage, a.bwd_microbatch, e);
      break;
    case ActionType::SendForward: e.make(t.slot(kForwardSent, a.stage, a.microbatch)); break;
    case ActionType::SendBackward: e.make(t.slot(kBackwardSent, a.stage, a.microbatch)); break;
    case ActionType::RecvForward:
      if (a.stage > 0) e.need(t.slot(kForwardSent, a.stage - 1, a.microbatch));
      break;
    case ActionType::RecvBackward:
      if (a.stage + 1 < S) e.need(t.slot(kBackwardSent, a.stage + 1, a.microbatch));
      break;
    case ActionType::Unshard:
    case ActionType::Reshard:
    case ActionType::ReduceGrad: break;  // the rank's own link, timed by DataParallelLink
  }
  return e;
}

void check_indices(const Schedule& schedule, int rank, const Action& a) {
  auto in_range = [&](int s, int m) {
    return s >= 0 && s < schedule.num_stages && m >= 0 && m < schedule.num_microbatches;
  };
  if (!in_range(a.stage, a.is_data_parallel() ? 0 : a.microbatch) ||
      (a.type == ActionType::Overlapped && !in_range(a.bwd_stage, a.bwd_microbatch))) {
    throw InvalidSchedule(detail::concat("rank ", rank, ": action ", to_string(a), " is outside stages 0..",
                                         schedule.num_stages - 1, " and micro-batches 0..",
                                         schedule.num_microbatches - 1));
  }
}

// Each rank's data-parallel link: the collectives run one after another on it, beside the rank's compute. Its
// tables are made at the first collective: the planner's many walks of schedules without any pay nothing.
class DataParallelLink {
 public:
  DataParallelLink(int ranks, int stages) : ranks_(ranks), stages_(stages) {}

  ActionTime run(int rank, const Action& a, double issued, double duration) {
    if (free_at_.empty()) free_at_.assign(ranks_, 0.0), unsharded_at_.assign(ranks_, std::vector<double>(stages_));
    const double start = std::max(issued, free_at_[rank]);
    free_at_[rank] = start + duration;
    if (a.type == ActionType::Unshard) unsharded_at_[rank][a.stage] = start + duration;
    return {start, start + duration};
  }
  // The earliest a compute action may start: once the parameters of its stages are gathered.
  double ready(int rank, const Action& a, double start) const {
    if (unsharded_at_.empty()) return start;
    start = std::max(start, unsharded_at_[rank][a.stage]);
    if (a.type == ActionType::Overlapped) start = std::max(start, unsharded_at_[rank][a.bwd_stage]);
    return start;
  }

 private:
  int ranks_, stages_;
  std::vector<double> free_at_;
  std::vector<std::vector<double>> unsharded_at_;  // [rank][stage]: when its UNSHARD ends (0: none)
};

}  // namespace

DependencyWalk walk_dependencies(const Schedule& schedule,
                                 const std::function<double(int rank, const Action&)>& duration,
                                 double latency, double gap) {
  const int R = static_cast<int>(schedule.actions.size());
  const int S = schedule.num_stages;
  for (int r = 0; r < R; ++r) {
    for (const Action& a : schedule.actions[r]) check_indices(schedule, r, a);
  }

  EventTable table(S, schedule.num_microbatches);
  DataParallelLink link(R, S);
  DependencyWalk walk;
  walk.times.resize(R);
  std::vector<std::size_t> cursor(R, 0);
  std::vector<double> clock(R, 0.0);
  std::vector<int> next_waiter(R, -1);
  std::vector<int> blocked_on(R, -1);
  std::vector<int> runnable(R);
  for (int r = 0; r < R; ++r) {
    walk.times[r].resize(schedule.actions[r].size());
    runnable[r] = R - 1 - r;  // popped from the back: rank 0 first
  }

  while (!runnable.empty()) {
    const int r = runnable.back();
    runnable.pop_back();
    blocked_on[r] = -1;
    const auto& actions = schedule.actions[r];
    while (cursor[r] < actions.size()) {
      const Action& a = actions[cursor[r]];
      if (a.is_data_parallel()) {
        walk.times[r][cursor[r]++] = link.run(r, a, clock[r], duration(r, a));
        continue;
      }
      const Edges e = edges_of(table, S, a);
      double start = clock[r];
      int missing = -1;
      for (int i = 0; i < e.num_needs && missing < 0; ++i) {
        const int slot = e.needs[i];
        if (!table.done(slot)) {
          missing = slot;
        } else {
          const bool remote = table.rank(slot) != r && a.is_compute();
          start = std::max(start, table.time(slot) + (remote ? latency : 0.0));
        }
      }
      if (missing >= 0) {  // park this rank until the slot is produced
        blocked_on[r] = missing;
        next_waiter[r] = table.waiters(missing);
        table.waiters(missing) = r;
        break;
      }
      if (a.is_compute()) start = link.ready(r, a, start);
      const double end = start + (a.is_compute() ? duration(r, a) : 0.0);
      walk.times[r][cursor[r]] = {start, end};
      clock[r] = end + (a.is_compute() ? gap : 0.0);
      for (int i = 0; i < e.num_makes; ++i) {
        const int slot = e.makes[i];
        if (table.done(slot)) continue;  // a duplicate: the validator reports it
        table.mark(slot, end, r);
        for (int w = table.waiters(slot); w >= 0; w = next_waiter[w]) runnable.push_back(w);
        table.waiters(slot) = -1;
      }
      ++cursor[r];
    }
  }

  for (int r = 0; r < R; ++r) {
    if (cursor[r] < schedule.actions[r].size()) {
      walk.blocked.push_back({r, static_cast<int>(cursor[r]),
                              blocked_on[r] >= 0 ? table.describe(blocked_on[r]) : std::string("?")});
    }
  }
  return walk;
}

}  // namespace dualpipe
