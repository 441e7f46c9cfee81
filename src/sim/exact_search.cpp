#include "dualpipe/sim/exact_search.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "dualpipe/sim/activation_memory.h"
#include "dualpipe/util/error.h"
#include "time_tolerance.h"

namespace dualpipe {
namespace {

using detail::kEps;
using detail::kInf;

struct SearchLane {
  int rank = 0;
  int stage = 0;
  std::vector<int> microbatches;
};

// Everything a node of the search knows; copied into each branch (small cases only), into a State kept for its
// depth (Solver::by_depth_), so that the copy reuses its vectors' storage rather than allocating.
struct State {
  std::vector<double> clock, first, remaining;  // per rank
  std::vector<int> waiting;                     // per rank: 1 while its chosen next action waits for an input
  std::vector<Action> next;                     // per rank: that action
  std::vector<double> forward_end, backward_end;
  std::vector<int> forwards, inputs, weights;   // per lane: actions done (or chosen)
  std::vector<ActivationCounter> memory;
  int left = 0;                                 // actions not yet run
};

class Solver {
 public:
  explicit Solver(const ExactRequest& r) : req_(r), S_(r.placement.num_stages()), M_(r.num_microbatches) {
    const int R = r.placement.num_ranks();
    lanes_of_rank_.resize(R);
    for (int replica = 0; replica < r.placement.num_replicas(); ++replica) {
      std::vector<int> mbs;
      for (int m = 0; m < M_; ++m)
        if (r.placement.replica(m) == replica) mbs.push_back(m);
      if (mbs.empty()) continue;
      for (int s = 0; s < S_; ++s) {
        const int rank = r.placement.rank_of(replica, s);
        lanes_of_rank_[rank].push_back(static_cast<int>(lanes_.size()));
        lanes_.push_back({rank, s, mbs});
      }
    }
    best_ = r.upper_bound.value_or(kInf);
  }

  ExactResult run() {
    const int R = req_.placement.num_ranks();
    State s;
    s.clock.assign(R, 0.0);
    s.first.assign(R, kInf);
    s.remaining.assign(R, 0.0);
    s.waiting.assign(R, 0);
    s.next.assign(R, Action{});
    s.forward_end.assign(static_cast<std::size_t>(S_) * M_, -1.0);
    s.backward_end = s.forward_end;
    s.forwards.assign(lanes_.size(), 0);
    s.inputs = s.weights = s.forwards;
    s.memory.assign(R, ActivationCounter(req_.costs));
    for (const SearchLane& lane : lanes_) {
      for (int m : lane.microbatches) {
        s.remaining[lane.rank] += req_.costs.duration(Action::forward(lane.stage, m)) +
                                  req_.costs.duration(Action::backward_input(lane.stage, m)) +
                                  req_.costs.duration(Action::backward_weight(lane.stage, m));
        s.left += 3;
      }
    }
    by_depth_.resize(static_cast<size_t>(s.left));  // a branch adds one action: depth <= the actions
    search(s);
    ExactResult result;
    result.complete = !cut_short_;
    result.nodes = nodes_;
    if (found_) {
      Schedule out;
      out.kind = "exact";
      out.num_ranks = R;
      out.num_stages = S_;
      out.num_microbatches = M_;
      out.placement = req_.placement;
      out.actions = std::move(best_orders_);
      result.schedule = std::move(out);
    }
    return result;
  }

 private:
  std::size_t slot(int stage, int m) const { return static_cast<std::size_t>(stage) * M_ + m; }

  // When the action's inputs are ready on rank r, or -1 while one is not produced yet.
  double ready(const State& s, int r, const Action& a) const {
    const auto from = [&](double end, int producer) {
      return end < 0 ? -1.0 : end + (producer == r ? 0.0 : req_.costs.comm);
    };
    switch (a.type) {
      case ActionType::Forward:
        if (a.stage == 0) return 0.0;
        return from(s.forward_end[slot(a.stage - 1, a.microbatch)], req_.placement.rank(a.stage - 1, a.microbatch));
      case ActionType::BackwardInput: {
        const double own = s.forward_end[slot(a.stage, a.microbatch)];
        if (own < 0) return -1.0;
        if (a.stage == S_ - 1) return own;
        const double next =
            from(s.backward_end[slot(a.stage + 1, a.microbatch)], req_.placement.rank(a.stage + 1, a.microbatch));
        return next < 0 ? -1.0 : std::max(own, next);
      }
      default:
        return s.backward_end[slot(a.stage, a.microbatch)];
    }
  }

  // Runs every chosen action whose inputs are ready, until none is.
  void propagate(State& s) const {
    for (bool moved = true; moved;) {
      moved = false;
      for (std::size_t r = 0; r < s.clock.size(); ++r) {
        if (!s.waiting[r]) continue;
        const Action& a = s.next[r];
        const double t = ready(s, static_cast<int>(r), a);
        if (t < 0) continue;
        const double start = std::max(s.clock[r], t), d = req_.costs.duration(a);
        s.clock[r] = start + d;
        s.first[r] = std::min(s.first[r], start);
        s.remaining[r] -= d;
        if (a.type == ActionType::Forward) s.forward_end[slot(a.stage, a.microbatch)] = start + d;
        if (a.type == ActionType::BackwardInput) s.backward_end[slot(a.stage, a.microbatch)] = start + d;
        s.waiting[r] = 0;
        --s.left;
        moved = true;
      }
    }
  }

  double bound(const State& s) const {
    double lb = 0;
    for (std::size_t r = 0; r < s.clock.size(); ++r) {
      if (req_.objective == PlanObjective::Makespan) {
        lb = std::max(lb, s.clock[r] + s.remaining[r]);
      } else {
        lb = std::max(lb, s.first[r] < kInf ? s.clock[r] - s.first[r] + s.remaining[r] : s.remaining[r]);
      }
    }
    return lb;
  }

  void search(State& s) {
    if (nodes_ == req_.node_limit) {
      cut_short_ = true;
      return;
    }
    ++nodes_;
    propagate(s);
    if (bound(s) >= best_ - kEps) return;
    if (s.left == 0) {
      best_ = bound(s);  // every rank is done: the bound is the value
      best_orders_.assign(s.clock.size(), {});
      for (const auto& [rank, action] : path_) best_orders_[rank].push_back(action);
      found_ = true;
      return;
    }
    // Branch on the free rank with the earliest clock: each tuple of per-rank orders is reached once.
    int r = -1;
    for (std::size_t q = 0; q < s.clock.size(); ++q) {
      if (s.waiting[q] || !has_work(s, static_cast<int>(q))) continue;
      if (r < 0 || s.clock[q] < s.clock[r]) r = static_cast<int>(q);
    }
    if (r < 0) return;  // every rank with work waits for another: deadlock
    for (int lane_index : lanes_of_rank_[r]) {
      const SearchLane& lane = lanes_[lane_index];
      const int f = s.forwards[lane_index], i = s.inputs[lane_index], w = s.weights[lane_index];
      const int n = static_cast<int>(lane.microbatches.size());
      if (f < n) branch(s, r, lane_index, Action::forward(lane.stage, lane.microbatches[f]));
      if (i < f) branch(s, r, lane_index, Action::backward_input(lane.stage, lane.microbatches[i]));
      if (w < i) branch(s, r, lane_index, Action::backward_weight(lane.stage, lane.microbatches[w]));
      if (cut_short_) return;
    }
  }

  bool has_work(const State& s, int r) const {
    for (int lane_index : lanes_of_rank_[r])
      if (s.weights[lane_index] < static_cast<int>(lanes_[lane_index].microbatches.size())) return true;
    return false;
  }

  void branch(const State& s, int r, int lane_index, const Action& a) {
    ActivationCounter probe = s.memory[r];
    if (probe.apply(a) > req_.memory_limit + kEps) return;
    State& child = by_depth_[path_.size()];  // the parent is at the depth before (or the root): never this one
    child = s;
    child.memory[r] = probe;
    child.next[r] = a;
    child.waiting[r] = 1;
    if (a.type == ActionType::Forward) ++child.forwards[lane_index];
    if (a.type == ActionType::BackwardInput) ++child.inputs[lane_index];
    if (a.type == ActionType::BackwardWeight) ++child.weights[lane_index];
    path_.emplace_back(r, a);
    search(child);
    path_.pop_back();
  }

  const ExactRequest& req_;
  int S_;
  int M_;
  std::vector<SearchLane> lanes_;
  std::vector<std::vector<int>> lanes_of_rank_;
  double best_ = kInf;
  bool found_ = false;
  // The choices from the root to the node being searched (rank, action): each rank's order so far, kept here
  // rather than copied into every node.
  std::vector<std::pair<int, Action>> path_;
  std::vector<State> by_depth_;  // by_depth_[d]: the node at depth d + 1 being searched
  std::vector<std::vector<Action>> best_orders_;
  std::int64_t nodes_ = 0;   // searched: at most node_limit
  bool cut_short_ = false;  // a node was left unsearched at the limit
};

}  // namespace

ExactResult exact_search(const ExactRequest& request) {
  DUALPIPE_REQUIRE(request.num_microbatches >= 1, "exact search needs at least one micro-batch");
  return Solver(request).run();
}

}  // namespace dualpipe
