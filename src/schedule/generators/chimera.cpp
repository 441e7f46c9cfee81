// Chimera (Li and Hoefler 2021, "Chimera: Efficiently Training Large-Scale Neural Networks with Bidirectional
// Pipelines"): two pipelines over the same R ranks in opposite directions, DualPipe's placement. The "down"
// pipeline runs stage s on rank s, the "up" pipeline stage s on rank R-1-s, so every rank holds two stages
// (two parameter copies), and where one pipeline's warm-up and drain leave a rank idle, the other pipeline,
// which is at the opposite end of its own, has work for it.
//
// Basic unit: R micro-batches. In unit j, micro-batches j*R .. j*R+R/2-1 go down and j*R+R/2 .. (j+1)*R-1 go
// up. Each direction on its own is a plain 1F1B over R stages and R/2 micro-batches. A rank's order is the
// union of its two 1F1B sequences (its down stage r and its up stage R-1-r), sorted by the time each action
// starts in its own standalone 1F1B, timed with unit costs F = 1, B = 2; on equal start times the down
// pipeline goes first. Longer runs concatenate units: every rank runs all of unit j before any of unit j+1
// (the paper's "direct concatenation").
//
// Why this cannot deadlock: in a standalone 1F1B every data dependency runs from an action to one that starts
// strictly later (a consumer starts no earlier than its producer ends, and every action takes time > 0). Sort
// ALL actions of both pipelines by (standalone start, down before up, rank): that single global sequence
// respects every data dependency (they go strictly forward in start time) and, restricted to one rank, is
// exactly that rank's order. Running the ranks along it never waits on something not yet run, so the per-rank
// orders are deadlock-free. Units only depend on themselves, so running them one after another keeps this.
#include <algorithm>
#include <tuple>

#include "dualpipe/dependency_walk.h"
#include "generator_util.h"

namespace dualpipe {
namespace {

// One action of a unit on one rank, with the key it is merged by.
struct Timed {
  double start = 0;
  int direction = 0;  // 0 down, 1 up: down wins ties
  int index = 0;      // position in its own standalone order (keeps the sort total)
  Action action;
};

}  // namespace

Schedule make_chimera(const ScheduleOptions& o) {
  gen::require_basic("Chimera", o);
  gen::require_stages_per_rank("Chimera", o, 2);
  const int R = o.num_ranks, M = o.num_microbatches;
  DUALPIPE_REQUIRE(R % 2 == 0, "Chimera needs an even number of ranks (half of each unit goes each way), got R=",
                   R);
  DUALPIPE_REQUIRE(M % R == 0, "Chimera needs M to be a multiple of R (basic units of R micro-batches), got M=", M,
                   " for R=", R);
  const int half = R / 2;

  // One direction's standalone 1F1B over R stages and R/2 micro-batches, timed with F = 1, B = 2.
  ScheduleOptions one_way;
  one_way.num_ranks = R;
  one_way.num_microbatches = half;
  const Schedule standalone = make_1f1b(one_way);
  const DependencyWalk walk = walk_dependencies(standalone, [](int, const Action& a) {
    return a.type == ActionType::Forward ? 1.0 : 2.0;
  });
  DUALPIPE_CHECK(walk.blocked.empty(), "standalone 1F1B for R=", R, " deadlocked");

  // The merged order of one unit on rank r, with micro-batches numbered within the unit (0 .. R-1).
  // Stage s of the down pipeline sits on rank s; stage s of the up pipeline on rank R-1-s, so rank r runs the
  // standalone sequence of stage r going down and of stage R-1-r going up, the latter shifted by R/2.
  std::vector<std::vector<Action>> unit(R);
  for (int r = 0; r < R; ++r) {
    std::vector<Timed> merged;
    for (int direction = 0; direction < 2; ++direction) {
      const int stage = direction == 0 ? r : R - 1 - r;
      const auto& seq = standalone.actions[stage];
      for (int i = 0; i < static_cast<int>(seq.size()); ++i) {
        Action a = seq[i];
        a.microbatch += direction * half;
        merged.push_back({walk.times[stage][i].start, direction, i, a});
      }
    }
    std::sort(merged.begin(), merged.end(), [](const Timed& a, const Timed& b) {
      return std::tie(a.start, a.direction, a.index) < std::tie(b.start, b.direction, b.index);
    });
    for (const Timed& t : merged) unit[r].push_back(t.action);
  }

  std::vector<std::uint8_t> direction(M);
  for (int m = 0; m < M; ++m) direction[m] = (m % R) < half ? 0 : 1;
  Schedule s = gen::empty_schedule("chimera", R, R, M, Placement::bidirectional(R, std::move(direction)));
  for (int j = 0; j < M / R; ++j) {  // direct concatenation of basic units
    for (int r = 0; r < R; ++r) {
      for (Action a : unit[r]) {
        a.microbatch += j * R;
        s.actions[r].push_back(a);
      }
    }
  }
  return s;
}

}  // namespace dualpipe
