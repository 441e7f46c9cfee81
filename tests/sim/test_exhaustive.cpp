// The planner against exhaustive search on tiny cases (issue 12: R <= 3, M <= 4): an independent branch and bound
// over every per-rank order of forwards, input backwards (I) and weight gradients (W), written here without the
// planner's code, timing each partial order from scratch and counting memory by spec section 2's rules, every
// branch explored or cut by a lower bound that no completion can beat. Its optimum must be the planner's value:
// never lower (the planner missed a better schedule), never higher (the planner's schedule is in the space, so
// the search would be broken).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "dualpipe/sim/planner.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/util/error.h"

namespace dualpipe {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Job {
  char kind;  // 'F', 'I', 'W'
  int stage, mb;
};

struct Case {
  Placement placement;
  int M;
  CostModel costs;  // per stage
  double limit;     // stage activations per rank
  bool span;        // objective: largest per-rank span, else makespan
};

class Exhaustive {
 public:
  explicit Exhaustive(const Case& c) : c_(c), R_(c.placement.num_ranks()), S_(c.placement.num_stages()) {
    // Each rank's stages, per replica, with the micro-batches that pass them in order.
    for (int replica = 0; replica < c.placement.num_replicas(); ++replica) {
      std::vector<int> mbs;
      for (int m = 0; m < c.M; ++m)
        if (c.placement.replica(m) == replica) mbs.push_back(m);
      if (mbs.empty()) continue;
      for (int s = 0; s < S_; ++s) chains_.push_back({c.placement.rank_of(replica, s), s, mbs});
    }
    total_.assign(R_, 0.0);
    for (const Chain& ch : chains_)
      for (int m : ch.mbs) total_[ch.rank] += time({'F', ch.stage, m}) + time({'I', ch.stage, m}) + time({'W', ch.stage, m});
  }

  // The best value strictly below `bound`, or kInf if there is none.
  double search(double bound) {
    best_ = bound;
    found_ = kInf;
    std::vector<std::vector<Job>> orders(R_);
    std::vector<int> f(chains_.size()), i(chains_.size()), w(chains_.size());
    dfs(orders, f, i, w);
    return found_;
  }

  long nodes() const { return nodes_; }

 private:
  struct Chain {
    int rank, stage;
    std::vector<int> mbs;
  };

  double time(const Job& j) const {
    switch (j.kind) {
      case 'F': return c_.costs.forward * c_.costs.scale(j.stage);
      case 'I': return (c_.costs.backward - c_.costs.weight) * c_.costs.scale(j.stage);
      default: return c_.costs.weight * c_.costs.scale(j.stage);
    }
  }

  // Spec section 2's memory count along one rank's order with an I keeping w_mem for its W.
  bool fits(const std::vector<Job>& order) const {
    double live = 0;
    for (const Job& j : order) {
      live += j.kind == 'F' ? 1.0 : j.kind == 'I' ? c_.costs.w_mem - 1.0 : -c_.costs.w_mem;
      if (live > c_.limit + 1e-9) return false;
    }
    return true;
  }

  // Times every prefix from scratch: sweeps over the ranks, each running its next job once its inputs have ends.
  struct Timing {
    std::vector<double> clock, first, done_work;
    std::vector<char> blocked;  // the rank's next chosen job waits for an input
  };
  Timing timing(const std::vector<std::vector<Job>>& orders) const {
    Timing t{std::vector<double>(R_, 0.0), std::vector<double>(R_, kInf), std::vector<double>(R_, 0.0),
             std::vector<char>(R_, 0)};
    std::vector<double> fend(S_ * c_.M, -1), iend(S_ * c_.M, -1);
    std::vector<std::size_t> next(R_, 0);
    for (bool moved = true; moved;) {
      moved = false;
      for (int r = 0; r < R_; ++r) {
        while (next[r] < orders[r].size()) {
          const Job& j = orders[r][next[r]];
          double ready = 0;
          auto need = [&](const std::vector<double>& ends, int s) {
            const double e = ends[s * c_.M + j.mb];
            if (e < 0) return false;
            ready = std::max(ready, e + (c_.placement.rank(s, j.mb) != r ? c_.costs.comm : 0.0));
            return true;
          };
          bool ok = true;
          if (j.kind == 'F' && j.stage > 0) ok = need(fend, j.stage - 1);
          if (j.kind == 'I') ok = need(fend, j.stage) && (j.stage == S_ - 1 || need(iend, j.stage + 1));
          if (j.kind == 'W') ok = need(iend, j.stage);
          if (!ok) break;
          const double start = std::max(t.clock[r], ready), end = start + time(j);
          t.first[r] = std::min(t.first[r], start);
          t.clock[r] = end;
          t.done_work[r] += time(j);
          if (j.kind == 'F') fend[j.stage * c_.M + j.mb] = end;
          if (j.kind == 'I') iend[j.stage * c_.M + j.mb] = end;
          ++next[r];
          moved = true;
        }
      }
    }
    for (int r = 0; r < R_; ++r) t.blocked[r] = next[r] < orders[r].size();
    return t;
  }

  double lower_bound(const Timing& t) const {
    double lb = 0;
    for (int r = 0; r < R_; ++r) {
      const double rest = total_[r] - t.done_work[r];
      lb = std::max(lb, c_.span ? (t.first[r] < kInf ? t.clock[r] - t.first[r] : 0.0) + rest : t.clock[r] + rest);
    }
    return lb;
  }

  void dfs(std::vector<std::vector<Job>>& orders, std::vector<int>& f, std::vector<int>& i, std::vector<int>& w) {
    ++nodes_;
    const Timing t = timing(orders);
    const double lb = lower_bound(t);
    if (lb >= best_ - 1e-9) return;
    // The next decision: the lowest rank that has jobs left and is not waiting.
    int r = -1;
    bool left = false;
    for (int q = 0; q < R_ && r < 0; ++q) {
      bool has = false;
      for (std::size_t k = 0; k < chains_.size(); ++k)
        if (chains_[k].rank == q && w[k] < static_cast<int>(chains_[k].mbs.size())) has = true;
      left = left || has;
      if (has && !t.blocked[q]) r = q;
    }
    if (!left) {
      bool any_blocked = std::any_of(t.blocked.begin(), t.blocked.end(), [](char b) { return b != 0; });
      if (!any_blocked) {  // complete: lb is the value
        best_ = lb;
        found_ = lb;
      }
      return;
    }
    if (r < 0) return;  // deadlock
    for (std::size_t k = 0; k < chains_.size(); ++k) {
      const Chain& ch = chains_[k];
      if (ch.rank != r) continue;
      const int n = static_cast<int>(ch.mbs.size());
      for (char kind : {'F', 'I', 'W'}) {
        int* counter = kind == 'F' ? &f[k] : kind == 'I' ? &i[k] : &w[k];
        const int limit = kind == 'F' ? n : kind == 'I' ? f[k] : i[k];
        if (*counter >= limit) continue;
        orders[r].push_back({kind, ch.stage, ch.mbs[*counter]});
        if (fits(orders[r])) {
          ++*counter;
          dfs(orders, f, i, w);
          --*counter;
        }
        orders[r].pop_back();
      }
    }
  }

  const Case& c_;
  int R_, S_;
  std::vector<Chain> chains_;
  std::vector<double> total_;
  double best_ = kInf, found_ = kInf;
  long nodes_ = 0;
};

struct Tiny {
  int R, M;
  std::string cost;
  std::vector<double> limits;  // 1/R slice activations; <= 0: none
};

Placement placement_of(const std::string& kind, int R, int M) {
  if (kind == "linear") return Placement::linear(R);
  if (kind == "v") return Placement::v_shape(R);
  std::vector<std::uint8_t> replica(M);
  for (int m = 0; m < M; ++m) replica[m] = m < (M + 1) / 2 ? 0 : 1;
  return Placement::bidirectional(R, replica);
}

int g_cases = 0;
long g_nodes = 0;

// For each placement on its own, the planner's best equals the exhaustive optimum.
void check(const Tiny& t, const std::string& kind, bool span) {
  for (double limit : t.limits) {
    PlanRequest q;
    q.num_ranks = t.R;
    q.num_microbatches = t.M;
    q.costs = CostModel::parse(t.cost);
    if (limit > 0) q.memory_limit = limit;
    q.objective = span ? PlanObjective::Span : PlanObjective::Makespan;
    q.placements = {kind};
    const std::string what = kind + " R=" + std::to_string(t.R) + " M=" + std::to_string(t.M) + " " + t.cost +
                             " limit " + std::to_string(limit) + (span ? " span" : " makespan");
    Plan plan;
    try {
      plan = plan_schedule(q);
    } catch (const InvalidArgument& e) {
      ADD_FAILURE() << what << ": " << e.what();
      continue;
    }
    const Placement p = placement_of(kind, t.R, t.M);
    Case c{p, t.M, costs_per_stage(q.costs, t.R, p.num_stages()),
           limit > 0 ? limit * p.num_stages() / t.R : kInf, span};
    Exhaustive search(c);
    const double optimum = search.search(kInf);
    EXPECT_NEAR(optimum, plan.best.score, 1e-9) << what << ": exhaustive optimum " << optimum << ", planner "
                                                << plan.best.score << " (" << plan.best.name << ")";
    ++g_cases;
    g_nodes += search.nodes();
  }
}

TEST(Exhaustive, LinearUpToThreeRanksAndFourMicroBatches) {
  for (const Tiny& t : {Tiny{2, 2, "", {0, 1, 1.5}}, Tiny{2, 3, "F=1,B=3,W=1", {0, 1, 2}},
                        Tiny{2, 4, "F=1,B=2,W=1,comm=0.25,w_mem=0.5", {0, 1.5, 2}}, Tiny{3, 2, "", {0, 1, 2}},
                        Tiny{3, 3, "F=2,B=3,W=1", {0, 1.5, 3}}, Tiny{3, 4, "", {0, 2, 3}},
                        Tiny{3, 4, "F=1,B=3,W=2,comm=0.5", {3}}}) {
    check(t, "linear", false);
    check(t, "linear", true);
  }
}

TEST(Exhaustive, VAndTwoDirections) {
  for (const Tiny& t : {Tiny{1, 3, "", {0, 1}}, Tiny{2, 2, "F=1,B=3,W=1", {0, 1, 1.5}}, Tiny{2, 3, "", {0, 2}}}) {
    check(t, "v", false);
    check(t, "v", true);
  }
  for (const Tiny& t : {Tiny{2, 2, "", {0, 1}}, Tiny{2, 4, "F=1,B=3,W=1,comm=0.25", {0, 1.5, 3}},
                        Tiny{3, 4, "", {0, 3}}}) {
    check(t, "two", false);
    check(t, "two", true);
  }
  std::printf("exhaustive: %d cases, %ld nodes\n", g_cases, g_nodes);
}

}  // namespace
}  // namespace dualpipe
