#include "dualpipe/sim/list_scheduler.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <queue>
#include <set>
#include <utility>
#include <vector>

#include "dualpipe/util/error.h"
#include "list_inputs.h"
#include "time_tolerance.h"

namespace dualpipe {
namespace {

using detail::InputTimes;
using detail::kEps;
using detail::kInf;
using detail::Lane;
using detail::RankState;
using detail::Ready;

enum class Step { Acted, Idled, Wait, Finished, Failed };

class Builder {
 public:
  Builder(const Placement& placement, int num_microbatches, const CostModel& costs, const ListPolicy& policy)
      : placement_(placement), S_(placement.num_stages()), M_(num_microbatches), costs_(costs), policy_(policy),
        inputs_(placement, num_microbatches, costs, ranks_) {
    const int R = placement.num_ranks();
    ranks_.assign(R, RankState(costs));
    for (int replica = 0; replica < placement.num_replicas(); ++replica) {
      std::vector<int> microbatches;
      for (int m = 0; m < M_; ++m)
        if (placement.replica(m) == replica) microbatches.push_back(m);
      if (microbatches.empty()) continue;
      for (int s = 0; s < S_; ++s) {
        ranks_[placement.rank_of(replica, s)].lanes.push_back(static_cast<int>(lanes_.size()));
        lanes_.push_back({s, microbatches, 0, 0, {}});
      }
    }
    // A lane's later lanes: those of its rank at a later stage, of either replica (a micro-batch of the other
    // direction at its later stage must find room too, or the two directions can block each other).
    for (const RankState& rank : ranks_)
      for (int a : rank.lanes)
        for (int b : rank.lanes)
          if (lanes_[b].stage > lanes_[a].stage) lanes_[a].later.push_back(b);
    pair_saves_ = costs.overlapped && *costs.overlapped < costs.forward + costs.backward;
    for (const Lane& lane : lanes_)
      for (int m : lane.microbatches)
        ranks_[placement.rank(lane.stage, m)].remaining +=
            costs.duration(Action::forward(lane.stage, m)) + costs.duration(Action::backward(lane.stage, m));
    give_up_ = policy.give_up_above < kInf && !(policy.overlap_pairs && pair_saves_);
    neighbours_.resize(R);
    for (int replica = 0; replica < placement.num_replicas(); ++replica) {
      for (int s = 0; s + 1 < S_; ++s) {
        const int a = placement.rank_of(replica, s), b = placement.rank_of(replica, s + 1);
        if (a == b) continue;
        neighbours_[a].push_back(b);
        neighbours_[b].push_back(a);
      }
    }
    for (auto& n : neighbours_) {
      std::sort(n.begin(), n.end());
      n.erase(std::unique(n.begin(), n.end()), n.end());
    }
  }

  std::optional<Schedule> run(std::string kind, ListTiming* timing) {
    const int R = static_cast<int>(ranks_.size());
    // Ranks that may act, earliest clock first (stale entries are skipped); a waiting rank is out of the queue
    // until a neighbour acts.
    using Entry = std::pair<double, int>;
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
    finished_.assign(R, 0);
    waiting_.assign(R, 0);
    for (int r = 0; r < R; ++r) queue.emplace(0.0, r);
    int left = R;
    while (left > 0) {
      if (queue.empty()) {
        // Every rank waits for an input whose time only a lower bound tells. Let the earliest one go on with what
        // it knows; if none knows anything to run, the memory limit leaves nothing to run.
        const int acted = force_progress();
        if (acted < 0) return std::nullopt;
        if (finished_[acted]) --left;
        else queue.emplace(ranks_[acted].clock, acted);
        for (int q : neighbours_[acted])
          if (!finished_[q]) queue.emplace(ranks_[q].clock, q);
        continue;
      }
      const auto [clock, pick] = queue.top();
      queue.pop();
      if (finished_[pick] || waiting_[pick] || clock != ranks_[pick].clock) continue;
      const Step result = step(pick);
      if (gave_up_) return std::nullopt;
      switch (result) {
        case Step::Acted:
          // Only a rank that takes an input from this one can have news (an input, or a later lower bound).
          for (int q : neighbours_[pick]) {
            if (!waiting_[q]) continue;
            wake(q);
            queue.emplace(ranks_[q].clock, q);
          }
          queue.emplace(ranks_[pick].clock, pick);
          break;
        case Step::Idled: queue.emplace(ranks_[pick].clock, pick); break;
        case Step::Wait:
          waiting_[pick] = 1;
          forcible_.emplace(ranks_[pick].clock, pick);
          break;
        case Step::Finished:
          finished_[pick] = 1;
          --left;
          break;
        case Step::Failed: return std::nullopt;
      }
    }
    if (timing) {
      *timing = ListTiming{};
      double first = kInf, last = 0;
      for (const RankState& rank : ranks_) {
        if (rank.actions.empty()) continue;
        first = std::min(first, rank.first);
        last = std::max(last, rank.clock);
        timing->max_span = std::max(timing->max_span, rank.clock - rank.first);
        timing->peak = std::max(timing->peak, rank.memory.peak());
      }
      timing->makespan = first < kInf ? last - first : 0.0;
    }
    Schedule s;
    s.kind = std::move(kind);
    s.num_ranks = R;
    s.num_stages = S_;
    s.num_microbatches = M_;
    s.placement = placement_;
    for (RankState& rank : ranks_) s.actions.push_back(std::move(rank.actions));
    return s;
  }

 private:
  // Room for the forward under the limit, keeping a forward's share for each later stage of the rank that still
  // has forwards to run, and, with recomputation, the rise of the next backward.
  bool forward_fits(const RankState& rank, const Lane& lane) const {
    if (policy_.inflight > 0 &&
        static_cast<double>(lane.forwards - lane.backwards) + 1 > std::ceil(policy_.inflight * (S_ - lane.stage) - kEps))
      return false;
    if (policy_.memory_limit == kInf) return true;
    // A forward adds its activation (only the stage input with recomputation) at its end: ActivationCounter's rule.
    const auto unit = [&](int stage) { return (costs_.recompute ? costs_.input_mem : 1.0) * costs_.activation_of(stage); };
    double reserve = costs_.recompute ? (1.0 - costs_.input_mem) * costs_.activation_of(lane.stage) : 0.0;
    if (policy_.reserve_for_later_stages)
      for (int later : lane.later)
        if (lanes_[later].forwards < lanes_[later].microbatches.size()) reserve += unit(lanes_[later].stage);
    return rank.memory.level() + unit(lane.stage) + reserve <= policy_.memory_limit + kEps;
  }

  // Earlier time first; on a tie a known time (a lower bound may be the rank's own next action), then the later
  // stage (closer to the loss on the way down).
  static bool better(const Ready& a, const Ready& b, const std::vector<Lane>& lanes) {
    if (!b.valid()) return true;
    if (a.time != b.time) return a.time < b.time;
    if (a.known != b.known) return a.known;
    return lanes[a.lane].stage > lanes[b.lane].stage;
  }

  void record(int r, const Action& a, double start) {
    RankState& rank = ranks_[r];
    const double end = start + costs_.duration(a);
    rank.memory.apply(a);
    rank.actions.push_back(a);
    rank.first = std::min(rank.first, start);
    rank.clock = end;
    rank.remaining -= end - start;
    if (give_up_) {
      // Every rank's remaining work runs after its clock: a lower bound of what the schedule can still reach.
      const double bound = policy_.give_up_on_span ? rank.clock - rank.first + rank.remaining
                                                   : rank.clock + rank.remaining;
      if (bound > policy_.give_up_above + kEps * std::max(1.0, bound)) gave_up_ = true;
    }
    inputs_.record(a, end);
  }

  Step run_weight(int r) {
    RankState& rank = ranks_[r];
    const auto [stage, m] = rank.deferred.front();
    rank.deferred.pop_front();
    record(r, Action::backward_weight(stage, m), rank.clock);
    return Step::Acted;
  }

  Step run_backward(int r, const Ready& ready) {
    RankState& rank = ranks_[r];
    Lane& lane = lanes_[ready.lane];
    const int m = lane.microbatches[lane.backwards];
    const Action a = policy_.split_backward ? Action::backward_input(lane.stage, m) : Action::backward(lane.stage, m);
    ActivationCounter probe = rank.memory;
    if (probe.apply(a) > policy_.memory_limit + kEps) {
      if (!rank.deferred.empty()) return run_weight(r);  // make room first
      return Step::Failed;                                // a recomputing backward cannot fit
    }
    record(r, a, std::max(rank.clock, ready.time));
    rank.started_backward = true;
    ++lane.backwards;
    if (policy_.split_backward) rank.deferred.emplace_back(lane.stage, m);
    return Step::Acted;
  }

  Step run_forward(int r, const Ready& ready) {
    Lane& lane = lanes_[ready.lane];
    record(r, Action::forward(lane.stage, lane.microbatches[lane.forwards]), std::max(ranks_[r].clock, ready.time));
    ++lane.forwards;
    return Step::Acted;
  }

  Step run_pair(int r, const Ready& f, const Ready& b) {
    Lane& fl = lanes_[f.lane];
    Lane& bl = lanes_[b.lane];
    const Action a = Action::overlapped(fl.stage, fl.microbatches[fl.forwards], bl.stage, bl.microbatches[bl.backwards]);
    ActivationCounter probe = ranks_[r].memory;
    if (probe.apply(a) > policy_.memory_limit + kEps) return run_backward(r, b);
    record(r, a, std::max({ranks_[r].clock, f.time, b.time}));
    ranks_[r].started_backward = true;
    ++fl.forwards;
    ++bl.backwards;
    return Step::Acted;
  }

  struct Candidates {
    Ready backward, forward, blocked;  // blocked: the earliest forward the memory limit holds back
    bool pending = false;              // forwards or backwards left on the rank
  };

  // The rank's next backward and forward; those whose input is not scheduled yet get a lower bound when `bounds`,
  // else an infinite time (bounds are dear, and not needed when something can start now).
  Candidates candidates(int r, bool bounds) const {
    const RankState& rank = ranks_[r];
    Candidates c;
    for (int index : rank.lanes) {
      const Lane& lane = lanes_[index];
      if (lane.backwards < lane.forwards) {
        c.pending = true;
        const Ready b = inputs_.backward_ready(r, index, lane, bounds);
        if (better(b, c.backward, lanes_)) c.backward = b;
      }
      if (lane.forwards < lane.microbatches.size()) {
        c.pending = true;
        const Ready f = inputs_.forward_ready(r, index, lane, bounds);
        if (forward_fits(rank, lane)) {
          if (better(f, c.forward, lanes_)) c.forward = f;
        } else if (better(f, c.blocked, lanes_)) {
          c.blocked = f;
        }
      }
    }
    return c;
  }

  // A waiting rank is back in play: a neighbour acted, so it may have news.
  void wake(int r) {
    waiting_[r] = 0;
    forcible_.erase({ranks_[r].clock, r});
  }

  // Lets the waiting rank with the earliest clock act on its known candidates only, and returns it; -1 when no
  // waiting rank can. A forced step depends only on the rank's own state and its neighbours' recorded ends, so a
  // rank that could not act stays out of `forcible_` until a neighbour acts: each rank is tried once per news, not
  // once per call (trying every waiting rank at each call made plan -r 3000 -m 1 quadratic in R).
  int force_progress() {
    while (!forcible_.empty()) {
      const int r = forcible_.begin()->second;
      forcible_.erase(forcible_.begin());
      const Step result = step(r, true);
      if (result == Step::Wait) continue;
      if (result == Step::Failed) return -1;
      waiting_[r] = 0;
      if (result == Step::Finished) finished_[r] = 1;
      for (int q : neighbours_[r])
        if (waiting_[q]) wake(q);
      return r;
    }
    return -1;
  }

  Step step(int r, bool force = false) {
    RankState& rank = ranks_[r];
    const double t = rank.clock;
    Candidates c = candidates(r, false);
    const bool weights = !rank.deferred.empty();
    if (!c.pending && !weights) return Step::Finished;

    const bool backward_now = c.backward.valid() && c.backward.known && c.backward.time <= t + kEps;
    bool forward_now = c.forward.valid() && c.forward.known && c.forward.time <= t + kEps;
    const bool pairing = policy_.overlap_pairs && pair_saves_;
    if (backward_now && forward_now && pairing) return run_pair(r, c.forward, c.backward);
    if (pairing && !force && backward_now != forward_now) {
      // Wait for the other half when it comes sooner than the pair saves (F + B - FB).
      const Candidates b = candidates(r, true);
      const Ready& other = backward_now ? b.forward : b.backward;
      if (other.valid()) {
        const Ready& f = backward_now ? other : c.forward;
        const Ready& bw = backward_now ? c.backward : other;
        const Lane& fl = lanes_[f.lane];
        const Lane& bl = lanes_[bw.lane];
        const Action fa = Action::forward(fl.stage, fl.microbatches[fl.forwards]);
        const Action ba = Action::backward(bl.stage, bl.microbatches[bl.backwards]);
        const double saving = costs_.duration(fa) + costs_.duration(ba) -
                              costs_.duration(Action::overlapped(fa.stage, fa.microbatch, ba.stage, ba.microbatch));
        if (other.time - t < saving - kEps) {
          if (!other.known) return Step::Wait;
          rank.clock = other.time;
          return Step::Idled;
        }
      }
    }
    if (backward_now && (policy_.backward_first || !forward_now)) return run_backward(r, c.backward);
    const bool may_delay = rank.started_backward ? policy_.forward_may_delay_backward
                                                 : policy_.forward_may_delay_first_backward;
    if (forward_now && !may_delay && !force) {  // forced: the backward may need this very forward
      const Ready forward = c.forward;
      if (!backward_now) c = candidates(r, true);
      if (c.backward.valid() && c.backward.time < t + costs_.duration(Action::forward(lanes_[forward.lane].stage, 0)) - kEps) {
        if (!c.backward.known) return Step::Wait;  // it may or may not come in time: decide once it is scheduled
        forward_now = false;                       // hold the forward back for the backward
      } else {
        return run_forward(r, forward);
      }
    }
    if (forward_now) return run_forward(r, c.forward);
    if (backward_now) return run_backward(r, c.backward);

    // Nothing can start now. The next start: the earliest backward, or forward unless held back.
    if (!force) c = candidates(r, true);
    Ready next = c.backward;
    if (c.forward.valid() && !(c.forward.time <= t + kEps) && better(c.forward, next, lanes_)) next = c.forward;
    if (weights) {
      // Recycle memory for a forward that only the limit holds back.
      if (c.blocked.valid() && c.blocked.known && c.blocked.time <= t + kEps) return run_weight(r);
      const auto [stage, m] = rank.deferred.front();
      const double w = costs_.duration(Action::backward_weight(stage, m));
      // A lower bound of the gap is enough to decide that a W fits in it.
      if (!next.valid() || next.time - t >= policy_.w_fill * w - kEps) return run_weight(r);
    }
    if (next.valid() && next.known) {
      rank.clock = std::max(t, next.time);
      return Step::Idled;
    }
    return Step::Wait;
  }

  const Placement& placement_;
  int S_;
  int M_;
  const CostModel& costs_;
  ListPolicy policy_;
  std::vector<Lane> lanes_;
  std::vector<RankState> ranks_;
  InputTimes inputs_;  // after ranks_, whose clocks it reads
  bool pair_saves_ = false;
  bool give_up_ = false;
  bool gave_up_ = false;
  std::vector<std::vector<int>> neighbours_;  // ranks that exchange activations or gradients with each rank
  std::vector<char> finished_, waiting_;
  std::set<std::pair<double, int>> forcible_;  // waiting ranks a forced step has not found stuck since their news
};

}  // namespace

std::optional<Schedule> list_schedule(const Placement& placement, int num_microbatches, const CostModel& costs,
                                      const ListPolicy& policy, std::string kind, ListTiming* timing) {
  DUALPIPE_REQUIRE(num_microbatches >= 1, "a schedule needs at least one micro-batch, got M=", num_microbatches);
  DUALPIPE_REQUIRE(placement.num_replicas() == 1 || placement.num_microbatches() == num_microbatches,
                   "the placement maps ", placement.num_microbatches(), " micro-batches to replicas, not ",
                   num_microbatches);
  return Builder(placement, num_microbatches, costs, policy).run(std::move(kind), timing);
}

}  // namespace dualpipe
