// Calibrating the layout planner's time model on a measured run: the compute rate that reproduces a traced
// pipeline's forward and backward times (docs/layout.md, "Calibrated on this machine").
#pragma once

#include <string>

#include "dualpipe/layout/cluster_spec.h"
#include "dualpipe/layout/layout.h"
#include "dualpipe/layout/model_spec.h"
#include "dualpipe/sim/cost_model.h"
#include "dualpipe/trace/trace.h"

namespace dualpipe::layout {

struct Calibration {
  std::string source;              // the trace's path
  Layout layout;                   // the traced run's: pp, stages per rank, schedule and micro-batch size
  int steps = 0;                   // the steps measured (the trace's, less the first)
  double measured_seconds = 0;     // one micro-batch's F + B over every stage, the median over those steps
  double modelled_seconds = 0;     // the same by the time model, at the cluster's stated efficiency
  double shared_cores_slowdown = 1;  // in that, the model's slowdown of ranks beyond the host's cores
  double stated_efficiency = 0;    // the cluster's matmul_efficiency before
  double matmul_efficiency = 0;    // after: where the model gives the measured time (stated x modelled / measured
                                   // when only products are modelled, as on a cluster without GPU figures)
  // The time between one step's last action and the next step's first (optimizer, clipping, loss), the median
  // over the steps that have a next one, and what it gives per parameter a rank updates (0 with under 3 steps).
  double between_steps_seconds = 0;
  double update_ns_per_parameter = 0;
  // The run's step (first action to the next step's first action, the median), the model's for it with the
  // two fits above, and their ratio: what the model leaves out (1 with under 3 steps).
  double step_seconds = 0, modelled_step_seconds = 0, step_time_factor = 1;
};

// Fits cluster.matmul_efficiency so that the time model gives the traced run's compute time,
// cluster.update_ns_per_parameter to the time between its steps, and cluster.step_time_factor to its step time;
// returns what it measured. The trace is one `dualpipe train` run of `model` (dense or MoE, no expert parallelism, one
// data-parallel replica) with micro-batches of `micro_batch_size` sequences. Throws InvalidArgument naming the
// trace and the rule (no compute events, more stages than layers, a rate above the cluster's peak).
Calibration calibrate(const ModelSpec& model, ClusterSpec& cluster, const Trace& trace, int micro_batch_size,
                      const std::string& source);

// The compute rate alone, from a --cost string in microseconds (`dualpipe profile --kineto`'s, or `dualpipe
// compare`'s): F and B of one micro-batch of `micro_batch_size` sequences through each of `stages` equal stages of
// `model` (1: the whole model in one process), their means or a list with a value per stage.
Calibration calibrate_from_costs(const ModelSpec& model, ClusterSpec& cluster, const CostModel& costs, int stages,
                                 int micro_batch_size, const std::string& source);

}  // namespace dualpipe::layout
