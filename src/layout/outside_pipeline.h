// The parts of a step outside the pipeline's timeline (docs/layout.md, "The time model"): the data-parallel
// collectives, and how much of them runs behind the compute; the optimizer's update.
#pragma once

#include "dualpipe/layout/layout.h"
#include "dualpipe/schedule/zero_stage.h"

namespace dualpipe::layout {

struct DataParallelTime {
  double total = 0, exposed = 0;  // seconds a step
};

// ZeRO-0/1 reduce the gradients once, behind the last backward; ZeRO-2 reduce-scatters every micro-batch's
// gradients behind its backward and gathers the parameters once; ZeRO-3 also gathers the parameters for every
// forward and backward, behind them. Without layout.dp_overlap nothing hides. dense_params and expert_params: what
// the rank holds; forward and backward: one micro-batch's on the rank, every stage it holds (seconds).
DataParallelTime data_parallel_time(const ClusterSpec& cluster, const Layout& layout, ZeroStage zero,
                                    double dense_params, double expert_params, double forward, double backward);

// The update of the parameters whose optimizer state a rank holds: the calibrated rate where there is one, else
// mixed-precision Adam's HBM traffic; slowed like the compute where ranks share cores.
double update_seconds(const ClusterSpec& cluster, double parameters);

}  // namespace dualpipe::layout
