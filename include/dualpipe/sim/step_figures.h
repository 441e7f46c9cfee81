// The figures of one step (docs/schedules.md, "Metrics") from each rank's compute intervals. One computation for
// the simulator, the timelines of plans and of measured traces, `dualpipe compare` and the trainer's step report,
// so that a planned and a measured figure always mean the same thing.
#pragma once

#include <vector>

namespace dualpipe {

struct ComputeInterval {
  double start = 0, end = 0;
};

struct RankFigures {
  double busy = 0;  // sum of compute durations
  double idle = 0;  // makespan - busy
  double span = 0;  // last end - first start on the rank; 0 without compute
};

struct StepFigures {
  std::vector<RankFigures> per_rank;
  double makespan = 0;          // last end - first start over all ranks
  double bubble = 0;            // max idle
  double bubble_rate = 0;       // the Zero Bubble paper's (max span - max busy) / max span
  double step_bubble_rate = 0;  // 1 - sum of busy / (R x makespan)
};

// The Zero Bubble paper's bubble rate from the largest span and the largest busy time over the ranks; 0 without
// compute.
double span_bubble_rate(double max_span, double max_busy);

// Busy and span of one rank (idle needs the makespan: 0 here).
RankFigures busy_and_span(const std::vector<ComputeInterval>& compute);

// `beside_by_rank`: per rank, the intervals of collectives that run beside its compute and that the step waits for
// (the data-parallel ones): they count in the makespan and in the rank's span, not in its busy time.
StepFigures step_figures(const std::vector<std::vector<ComputeInterval>>& compute_by_rank,
                         const std::vector<std::vector<ComputeInterval>>& beside_by_rank = {});

}  // namespace dualpipe
