// Builds a schedule action by action for any placement (one direction, V, two directions, looped), in the
// manner of the Zero Bubble paper's heuristic (arXiv 2401.10241, section 3.1): ranks take their next action at
// the earliest time they are free, backwards before forwards, forwards as long as the memory limit allows, and
// deferred weight gradients (W) fill the gaps a rank would otherwise spend waiting, or recycle memory when the
// limit is hit. The policy's switches are what the planner searches over (planner.h).
#pragma once

#include <limits>
#include <optional>
#include <string>

#include "dualpipe/schedule/placement.h"
#include "dualpipe/schedule/schedule.h"
#include "dualpipe/sim/cost_model.h"

namespace dualpipe {

struct ListPolicy {
  // Peak live activations per rank, in stage activations as ActivationCounter counts them.
  double memory_limit = std::numeric_limits<double>::infinity();
  // When a forward and a backward are both ready, run the backward first.
  bool backward_first = true;
  // A forward may start although a backward will be ready before it ends (false: the rank waits for the backward
  // or fills the time with W): for the rank's first backward (the end of the warm-up), and for the others.
  bool forward_may_delay_first_backward = true;
  bool forward_may_delay_backward = true;
  // Run a pending W in an idle gap when the gap is at least w_fill x W (0: in every gap, even a short one).
  double w_fill = 1.0;
  // Backwards are split into I and a deferred W (false: full B, never deferred).
  bool split_backward = true;
  // When a forward and a full backward are both ready, run them as one overlapped pair (F;B) (useful when
  // FB < F + B).
  bool overlap_pairs = false;
  // Forwards of a stage that is not the rank's last stage on the micro-batch's path leave room in memory for a
  // forward of each later stage on the rank, so a micro-batch that comes back (V, two directions) can go on.
  bool reserve_for_later_stages = true;
  // Give up (return nullopt) as soon as the schedule cannot end with a makespan (or, with give_up_on_span, a largest
  // per-rank span) at or below this: a search's best so far. Not used with overlap_pairs (a pair's saving makes the
  // remaining work no lower bound).
  double give_up_above = std::numeric_limits<double>::infinity();
  bool give_up_on_span = false;
  // At most ceil(inflight x (S - s)) micro-batches between their forward and their backward at stage s: 1 is the
  // 1F1B/ZB-H1 warm-up, 2 about ZB-H2's; memory not spent on more forwards is left for deferred W's. 0: no cap.
  double inflight = 0;
};

// The builder's own timing of the schedule it returns: simulate() gives the same (tests/sim/test_list_scheduler.cpp),
// so a search can rank policies without simulating each schedule again.
struct ListTiming {
  double makespan = 0;
  double max_span = 0;  // the largest per-rank span
  double peak = 0;      // the worst rank's peak, in stage activations
};

// The schedule the policy builds for M micro-batches on the placement (two-direction placements carry the
// micro-batch to replica mapping), or nullopt when it cannot finish: the memory limit leaves no action to run
// (deadlock) or a backward with recomputation must exceed it. Costs time the decisions only; the result is
// timed again by simulate().
std::optional<Schedule> list_schedule(const Placement& placement, int num_microbatches, const CostModel& costs,
                                      const ListPolicy& policy, std::string kind = "list",
                                      ListTiming* timing = nullptr);

}  // namespace dualpipe
