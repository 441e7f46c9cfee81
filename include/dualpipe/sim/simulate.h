// The discrete-event simulator and the metrics of spec section 2.
#pragma once

#include <vector>

#include "dualpipe/schedule/dependency_walk.h"
#include "dualpipe/schedule/schedule.h"
#include "dualpipe/sim/cost_model.h"
#include "dualpipe/sim/step_figures.h"

namespace dualpipe {

// A rank's step figures (busy, idle, span: step_figures.h) and what the plan holds there.
struct RankMetrics : RankFigures {
  int rank = 0;
  // Peak live activations in stage activations (activation_memory.h): whole numbers under the default memory
  // model (w_mem = 1, no recompute), fractions otherwise.
  double peak_activations = 0;
  double peak_activation_fraction = 0;   // peak_activations / S: a fraction of the whole model's activations
  double peak_activation_bytes = 0;      // peak_activations x the cost model's act_bytes (0 when not given)
  int stages_held = 0;                   // stage modules (chunks) on this rank: 2 for V placements and DualPipe
  // The rank's parameters in 1/R slices of the model, stages_held x R / S: 2 where the model is held twice
  // (DualPipe, Chimera), 1 for one copy cut into chunks (ZBV, DualPipeV, interleaved 1F1B).
  double parameter_copies = 0;
};

struct Metrics {
  double makespan = 0;  // the step time: last end - first start over all ranks
  double bubble = 0;    // max over ranks of idle (makespan - busy): the DualPipe paper's bubble
  // The Zero Bubble paper's bubble rate, (max span - max busy) / max span: gaps inside a rank's span only, so a
  // rank that starts late but then never waits (ZB-H2, ZBV) counts no bubble.
  double bubble_rate = 0;
  // The step's share of idle device time, 1 - sum of busy / (R x makespan): late starts and early ends count.
  double step_bubble_rate = 0;
  std::vector<RankMetrics> per_rank;

  double peak_activations() const;  // worst rank
  // The step's figures alone, as step_figures() gives those of a measured step: the same type on both sides.
  StepFigures figures() const;
};

struct Simulation {
  std::vector<std::vector<ActionTime>> timeline;  // timeline[rank][index] aligned with schedule.actions
  Metrics metrics;
};

// Times the schedule under the cost model. Throws InvalidSchedule when the schedule deadlocks, InvalidArgument
// when the costs are invalid or their sums overflow. Stages past the end of stage_scale get 1 here; commands
// check user input with CostModel::check_stages first.
Simulation simulate(const Schedule& schedule, const CostModel& costs);

// Peak live stage activations per rank under spec section 2's integer count (w_mem = 1, no recompute); see
// activation_peaks() in activation_memory.h for the other memory models.
std::vector<int> peak_activations(const Schedule& schedule);

}  // namespace dualpipe
