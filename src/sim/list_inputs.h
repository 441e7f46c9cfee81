// The list scheduler's state (list_scheduler.cpp, internal to src/sim/): each rank's lanes and progress, and when
// an action's inputs are ready (InputTimes): exactly once their producers are scheduled, else a lower bound.
#pragma once

#include <algorithm>
#include <cstddef>
#include <deque>
#include <utility>
#include <vector>

#include "dualpipe/schedule/placement.h"
#include "dualpipe/sim/activation_memory.h"
#include "dualpipe/sim/cost_model.h"
#include "time_tolerance.h"

namespace dualpipe::detail {

// The micro-batches of one replica that pass one stage held by a rank, in order.
struct Lane {
  int stage = 0;
  std::vector<int> microbatches;
  std::size_t forwards = 0;   // forwards done (the next one is microbatches[forwards])
  std::size_t backwards = 0;  // backwards done
  std::vector<int> later;     // lanes of the same rank at a later stage
};

// When an action can start: exactly (known), or not before a lower bound while its input is not scheduled yet.
struct Ready {
  int lane = -1;
  double time = kInf;
  bool known = false;
  bool valid() const { return lane >= 0; }
};

struct RankState {
  double clock = 0;
  std::vector<int> lanes;
  std::deque<std::pair<int, int>> deferred;  // (stage, micro-batch) of I's whose W is pending, oldest first
  ActivationCounter memory;
  std::vector<Action> actions;
  bool started_backward = false;
  double first = kInf;  // the start of its first action
  double remaining = 0;  // compute time of the actions it has not run yet
  explicit RankState(const CostModel& costs) : memory(costs) {}
};

// The ends of the forwards and input backwards scheduled so far, and from them when a rank's next forward or backward
// can start.
class InputTimes {
 public:
  // `ranks`: the builder's, whose clocks bound the actions not scheduled yet (kept by reference).
  InputTimes(const Placement& placement, int num_microbatches, const CostModel& costs,
             const std::vector<RankState>& ranks)
      : placement_(placement), S_(placement.num_stages()), M_(num_microbatches), costs_(costs), ranks_(ranks),
        forward_end_(static_cast<std::size_t>(S_) * M_, -1.0), backward_end_(forward_end_.size(), -1.0) {}

  // The action ended at `end`: the inputs it produces are ready then.
  void record(const Action& a, double end) {
    switch (a.type) {
      case ActionType::Forward: forward_end_[slot(a.stage, a.microbatch)] = end; break;
      case ActionType::Backward:
      case ActionType::BackwardInput: backward_end_[slot(a.stage, a.microbatch)] = end; break;
      case ActionType::Overlapped:
        forward_end_[slot(a.stage, a.microbatch)] = end;
        backward_end_[slot(a.bwd_stage, a.bwd_microbatch)] = end;
        break;
      default: break;
    }
  }

  // When the next forward (backward) of `lane`, the lane_index-th, can start on rank r: exactly when its input is
  // scheduled; else a lower bound when `bounds`, an unknown (infinite) time otherwise.
  Ready forward_ready(int r, int lane_index, const Lane& lane, bool bounds) const {
    const int m = lane.microbatches[lane.forwards];
    if (lane.stage == 0) return {lane_index, 0.0, true};
    const int producer = placement_.rank(lane.stage - 1, m);
    const double end = forward_end_[slot(lane.stage - 1, m)];
    if (end >= 0) return {lane_index, end + latency(producer, r), true};
    if (!bounds) return {lane_index, kInf, false};
    return {lane_index, forward_end_bound(lane.stage - 1, m) + latency(producer, r), false};
  }

  Ready backward_ready(int r, int lane_index, const Lane& lane, bool bounds) const {
    const int m = lane.microbatches[lane.backwards];
    const double own = forward_end_[slot(lane.stage, m)];
    if (lane.stage == S_ - 1) return {lane_index, own, true};
    const int producer = placement_.rank(lane.stage + 1, m);
    const double end = backward_end_[slot(lane.stage + 1, m)];
    if (end >= 0) return {lane_index, std::max(own, end + latency(producer, r)), true};
    if (!bounds) return {lane_index, kInf, false};
    return {lane_index, std::max(own, backward_end_bound(lane.stage + 1, m) + latency(producer, r)), false};
  }

 private:
  // The earliest a forward or an input backward not scheduled yet can end: its inputs' earliest ends, and its rank
  // not before its clock. A lower bound: the rank may run other actions first.
  // Followed back at most kBoundDepth inputs: deeper chains cost more than they tell.
  static constexpr int kBoundDepth = 3;

  double forward_end_bound(int stage, int m, int depth = kBoundDepth) const {
    const double end = forward_end_[slot(stage, m)];
    if (end >= 0) return end;
    const int r = placement_.rank(stage, m);
    double ready = 0;
    if (stage > 0 && depth > 0)
      ready = forward_end_bound(stage - 1, m, depth - 1) + latency(placement_.rank(stage - 1, m), r);
    return std::max(ranks_[r].clock, ready) + costs_.duration(Action::forward(stage, m));
  }

  double backward_end_bound(int stage, int m, int depth = kBoundDepth) const {
    const double end = backward_end_[slot(stage, m)];
    if (end >= 0) return end;
    const int r = placement_.rank(stage, m);
    double ready = depth > 0 ? forward_end_bound(stage, m, depth - 1) : 0.0;
    if (stage + 1 < S_ && depth > 0)
      ready = std::max(ready, backward_end_bound(stage + 1, m, depth - 1) + latency(placement_.rank(stage + 1, m), r));
    return std::max(ranks_[r].clock, ready) + costs_.duration(Action::backward_input(stage, m));
  }

  std::size_t slot(int stage, int m) const { return static_cast<std::size_t>(stage) * M_ + m; }
  double latency(int from_rank, int to_rank) const { return from_rank == to_rank ? 0.0 : costs_.comm; }

  const Placement& placement_;
  int S_;
  int M_;
  const CostModel& costs_;
  const std::vector<RankState>& ranks_;
  std::vector<double> forward_end_;
  std::vector<double> backward_end_;
};

}  // namespace dualpipe::detail
