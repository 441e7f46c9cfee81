// What `dualpipe plan --from-kineto` reads from one job's PyTorch profiler traces (one per rank): the costs of a
// 1/R slice of the model and the events that made them, and, where `dualpipe train --kineto-trace` recorded the
// schedule it ran, that schedule simulated at the measured costs beside the step the traces measured.
#pragma once

#include <optional>
#include <string>

#include "dualpipe/schedule/schedule.h"
#include "dualpipe/sim/kineto_costs.h"
#include "dualpipe/trace/kineto_ranks.h"

namespace dualpipe {

// The ranks shared one host's cores (dualpipe.host_cores, fewer than the ranks): the costs are each action's time
// alone, its measured time over its measured slowdown, and the run is simulated with the cores shared.
struct SharedCores {
  std::string host;
  int cores = 0, ranks = 0;
  double measured_slowdown = 1;   // the work's time in the traces over its time alone
  double simulated_slowdown = 1;  // the same in the simulated step
};

struct KinetoRun {
  KinetoCosts costs;                 // of a 1/R slice, microseconds
  std::optional<Schedule> schedule;  // the schedule that ran, when the traces name it
  // Microseconds: the slowest rank's median ProfilerStep (or span of its work), and the step predicted at the
  // per-stage costs the traces measured (0 without a schedule): the schedule simulated, plus the update.
  double measured_step = 0;
  int slowest_rank = 0;
  double simulated_pipeline = 0;
  double simulated_step = 0;
  // The simulations whose median step is simulated_step, each action's time drawn from the traces' spread of its
  // occurrences around their mean (action_spread.h); 1: one at the mean costs (no compute regions to spread).
  int simulated_draws = 1;
  std::optional<SharedCores> shared_cores;
};

// One job's costs per stage, as read_kineto_run reads them before cutting them into slices: where its ranks shared
// a host's cores, each action's time alone (then `shared_cores`, where given, says how), and where the traces name
// their schedule and mark no messages, a message's time read from the waits for one (comm).
KinetoCosts kineto_run_costs(const KinetoRanks& ranks, const KinetoCostNames& names,
                             std::optional<SharedCores>* shared_cores = nullptr);

// Traces that name no schedule (a user's own, dualpipe.DualPipe's) but name stages give costs per slice of
// `ranks_given` ranks (the plan's --ranks); 0 leaves them per stage. Throws InvalidArgument when the ranks name
// different schedules, a schedule is invalid, or its stages differ from the stages the regions name (each naming
// the trace), or the stages named are fewer than `ranks_given`.
KinetoRun read_kineto_run(const KinetoRanks& ranks, const KinetoCostNames& names, int ranks_given = 0);

}  // namespace dualpipe
