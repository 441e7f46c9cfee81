// Chimera (Li and Hoefler 2021, "Chimera: Efficiently Training Large-Scale Neural Networks with Bidirectional
// Pipelines"): two pipelines over the same R = D ranks in opposite directions, DualPipe's placement. The "down"
// pipeline runs stage s on rank s, the "up" pipeline stage s on rank R-1-s, so every rank holds two stages
// (two parameter copies), and where one pipeline's warm-up and drain leave a rank idle, the other pipeline,
// which is at the opposite end of its own, has work for it.
//
// Basic unit: R micro-batches; in unit j, micro-batches j*R .. j*R+R/2-1 go down and the rest of the unit up.
// Micro-batch i of a direction (counting that direction's micro-batches only, over all units) is j*R+i%(R/2)
// (+R/2 going up) with j = i/(R/2).
//
// The order is built by running both pipelines together, timed with the paper's assumption B = 2F (F=1, B=2):
//  - Each rank holds two streams, its down stage r and its up stage R-1-r, each in 1F1B order over all M/2
//    micro-batches of its direction: w forwards, then backward/forward alternating, then the remaining
//    backwards. w = R-s at stage s as in 1F1B, but one less in the first half (s < R/2): full 1F1B warm-ups
//    would leave R-r + r+1 = D+1 activations on rank r once M > R, the paper's Table 1 allows at most D.
//    Within one unit (R/2 micro-batches per direction) the trim never binds: plain 1F1B.
//  - Whenever a rank is free it starts, of its two stream heads whose inputs are done, the one that can start
//    first; on a tie the one with the smaller slot, then the down one. The slot is where the action sits in
//    the paper's figure, where F and B take one slot each and each direction starts a micro-batch every
//    second slot (the ranks are shared by two pipelines) that then runs down and back without waiting:
//    F of micro-batch i at stage s in slot 2i+s, its B in slot 2i+2D-1-s (i runs on over all units).
// For one unit at D = 4 this gives exactly the paper's figure (each rank sorted by slot; bubble D-2 slots when
// F = B); for larger D the same F/B pattern on every rank and the same bubble, with some actions of the two
// directions in swapped places (the run starts a warm-up forward as soon as its input is there, the figure
// spaces them two slots apart). The paper's own concatenation of units (each unit's figure 2D slots after the
// previous one, each rank sorted by slot) leaves bubbles in the middle when B > F that add up with every unit
// (at F=1, B=2, R=4: 4, 6, 10 for 1, 2, 4 units); running the streams as their inputs arrive fills them, and
// the bubble stays at the basic unit's ((D-2) max(F, B) over the tests' grid).
//
// Why this cannot deadlock: a rank's order is the order in which the run above started its actions, and it
// starts an action only once all its inputs have finished. That run is one global sequence of all actions
// which respects every data dependency and, restricted to one rank, is that rank's order; so under any
// timing no rank ever waits for an action that is not before it in that sequence. The run itself cannot
// stall: the directions do not depend on each other, and each alone is a 1F1B whose warm-ups do not grow
// along the pipeline, which always has a stream head with its inputs done (checked below).
#include <algorithm>
#include <array>
#include <set>
#include <utility>
#include <vector>

#include "generator_util.h"

namespace dualpipe {

Schedule make_chimera(const ScheduleOptions& o) {
  gen::require_basic("Chimera", o);
  gen::require_stages_per_rank("Chimera", o, 2);
  const int R = o.num_ranks, M = o.num_microbatches;
  DUALPIPE_REQUIRE(R % 2 == 0, "Chimera needs an even number of ranks (half of each unit goes each way), got R=",
                   R);
  DUALPIPE_REQUIRE(M % R == 0, "Chimera needs M to be a multiple of R (basic units of R micro-batches), got M=", M,
                   " for R=", R);
  const int half = R / 2, per_direction = M / 2;
  auto direction_of = [&](int m) { return (m % R) < half ? 0 : 1; };
  auto index_in_direction = [&](int m) { return (m / R) * half + m % half; };
  auto rank_of = [&](int stage, int m) { return direction_of(m) == 0 ? stage : R - 1 - stage; };
  auto slot = [&](const Action& a) {
    const int i = index_in_direction(a.microbatch);
    return a.type == ActionType::Forward ? 2 * i + a.stage : 2 * i + 2 * R - 1 - a.stage;
  };

  // streams[r][d]: rank r's stage of direction d, in (trimmed) 1F1B order.
  std::vector<std::array<std::vector<Action>, 2>> streams(R);
  for (int r = 0; r < R; ++r) {
    for (int d = 0; d < 2; ++d) {
      const int stage = d == 0 ? r : R - 1 - r;
      const int warmup = std::min(per_direction, R - stage - (stage < half ? 1 : 0));
      auto mb = [&](int i) { return (i / half) * R + d * half + i % half; };
      auto& out = streams[r][d];
      int f = 0, b = 0;
      while (f < warmup) out.push_back(Action::forward(stage, mb(f++)));
      while (f < per_direction) {
        out.push_back(Action::backward(stage, mb(b++)));
        out.push_back(Action::forward(stage, mb(f++)));
      }
      while (b < per_direction) out.push_back(Action::backward(stage, mb(b++)));
    }
  }

  // The run, with F = 1, B = 2. end[F or B][stage*M + m]: when that action finished, -1 while it has not run.
  const std::size_t count = static_cast<std::size_t>(R) * M;
  std::array<std::vector<int>, 2> end{std::vector<int>(count, -1), std::vector<int>(count, -1)};
  auto at = [&](int stage, int m) { return static_cast<std::size_t>(stage) * M + m; };
  auto finished = [&](ActionType type, int stage, int m) {
    return end[type == ActionType::Forward ? 0 : 1][at(stage, m)];
  };
  // When the action's inputs are all done (-1 while one has not run).
  auto inputs_done = [&](const Action& a) {
    if (a.type == ActionType::Forward) {
      return a.stage == 0 ? 0 : finished(ActionType::Forward, a.stage - 1, a.microbatch);
    }
    const int own = finished(ActionType::Forward, a.stage, a.microbatch);
    const int next = a.stage == R - 1 ? 0 : finished(ActionType::Backward, a.stage + 1, a.microbatch);
    return own < 0 || next < 0 ? -1 : std::max(own, next);
  };
  std::vector<std::array<std::size_t, 2>> next(R, {0, 0});
  std::vector<int> free_at(R, 0);
  // Each rank's pick: (start, direction), start -1 when neither head has its inputs done.
  std::vector<std::pair<int, int>> pick(R, {-1, 0});
  std::set<std::pair<int, int>> queue;  // (start, rank) of the ranks with a pick
  auto refresh = [&](int r) {
    if (pick[r].first >= 0) queue.erase({pick[r].first, r});
    pick[r] = {-1, 0};
    int best_slot = 0;
    for (int d = 0; d < 2; ++d) {
      if (next[r][d] == streams[r][d].size()) continue;
      const Action& a = streams[r][d][next[r][d]];
      const int ready = inputs_done(a);
      if (ready < 0) continue;
      const int start = std::max(free_at[r], ready);
      if (pick[r].first < 0 || start < pick[r].first || (start == pick[r].first && slot(a) < best_slot)) {
        pick[r] = {start, d};
        best_slot = slot(a);
      }
    }
    if (pick[r].first >= 0) queue.insert({pick[r].first, r});
  };

  std::vector<std::uint8_t> direction(M);
  for (int m = 0; m < M; ++m) direction[m] = static_cast<std::uint8_t>(direction_of(m));
  Schedule s = gen::empty_schedule("chimera", R, R, M, Placement::bidirectional(R, std::move(direction)));
  for (int r = 0; r < R; ++r) refresh(r);
  // Starts are taken in time order: an action taken later starts no earlier and ends strictly later, so it
  // can never make a head ready before a start already taken.
  while (!queue.empty()) {
    const auto [start, r] = *queue.begin();
    const Action a = streams[r][pick[r].second][next[r][pick[r].second]++];
    const bool forward = a.type == ActionType::Forward;
    free_at[r] = start + (forward ? 1 : 2);
    end[forward ? 0 : 1][at(a.stage, a.microbatch)] = free_at[r];
    s.actions[r].push_back(a);
    refresh(r);  // its next head (and the B of an F just done, on this rank), then the consumer's rank
    if (forward && a.stage + 1 < R) refresh(rank_of(a.stage + 1, a.microbatch));
    if (!forward && a.stage > 0) refresh(rank_of(a.stage - 1, a.microbatch));
  }
  for (int r = 0; r < R; ++r) {
    DUALPIPE_CHECK(s.actions[r].size() == 2 * static_cast<std::size_t>(M), "Chimera's merge stalled on rank ", r,
                   " for R=", R, " M=", M);
  }
  return s;
}

}  // namespace dualpipe
