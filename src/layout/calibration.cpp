#include "dualpipe/layout/calibration.h"

#include <algorithm>
#include <limits>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/sim/trace_costs.h"
#include "dualpipe/util/error.h"
#include "layout/pipeline_costs.h"

namespace dualpipe::layout {

namespace {

double forward_plus_backward(const CostModel& costs, int stages) {
  double sum = 0;
  for (int s = 0; s < stages; ++s) sum += costs.forward_of(s) + costs.backward_of(s);
  return sum;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// The median gap between a step's last compute end and the next step's first start, over the steps after the
// first; 0 when the trace has fewer than 3 steps.
double between_steps(const Trace& trace, const std::vector<int>& steps) {
  std::vector<double> gaps;
  for (size_t k = 1; k + 1 < steps.size(); ++k) {
    double end = 0, next_start = std::numeric_limits<double>::infinity();
    for (const TraceEvent* e : step_compute_events(trace, steps[k])) end = std::max(end, e->start + e->duration);
    for (const TraceEvent* e : step_compute_events(trace, steps[k + 1])) next_start = std::min(next_start, e->start);
    gaps.push_back(std::max(0.0, next_start - end) * 1e-6);
  }
  return gaps.empty() ? 0 : median(gaps);
}

}  // namespace

Calibration calibrate(const ModelSpec& model, ClusterSpec& cluster, const Trace& trace, int micro_batch_size,
                      const std::string& source) {
  model.check();
  cluster.check();
  DUALPIPE_REQUIRE(micro_batch_size >= 1, "--calibrate-mbs must be >= 1, got ", micro_batch_size);
  DUALPIPE_REQUIRE(trace.num_ranks >= 1 && trace.num_stages >= trace.num_ranks &&
                       trace.num_stages % trace.num_ranks == 0,
                   "--calibrate '", source, "': the trace has no schedule header (ranks ", trace.num_ranks,
                   ", stages ", trace.num_stages, "); it must come from dualpipe train --trace");
  Calibration c;
  c.source = source;
  Layout& l = c.layout;
  l.pp = trace.num_ranks, l.vpp = trace.num_stages / trace.num_ranks;
  DUALPIPE_REQUIRE(find_generator(trace.kind), "--calibrate '", source, "': the run's schedule '", trace.kind,
                   "' is not one of the generators'; calibrate on a run of a named --schedule");
  l.schedule = find_generator(trace.kind)->name;
  l.micro_batch_size = micro_batch_size, l.recompute = Recompute::None, l.zero = 0;
  DUALPIPE_REQUIRE(trace.num_stages <= model.layers, "--calibrate '", source, "': the run cut the model into ",
                   trace.num_stages, " stages, more than the ", model.layers, " layers of --model ", model.name,
                   " (the trace must be a run of that model)");

  // The first step warms the allocator and the caches; the rest are measured, each as one micro-batch's F + B
  // summed over the stages, the median of them taken.
  const std::vector<int> steps = trace.steps();
  std::vector<double> per_step;
  for (const int step : steps) {
    if (step == steps.front() && steps.size() > 1) continue;
    const CostFit fit = fit_costs(trace, step);
    per_step.push_back(forward_plus_backward(fit.costs, trace.num_stages) * 1e-6);
  }
  DUALPIPE_REQUIRE(!per_step.empty() && *std::min_element(per_step.begin(), per_step.end()) > 0, "--calibrate '",
                   source, "': the trace has no forward or backward events to measure");
  c.steps = int(per_step.size());
  c.measured_seconds = median(per_step);
  c.modelled_seconds = forward_plus_backward(pipeline_costs(model, cluster, l, false).costs, trace.num_stages);
  c.stated_efficiency = cluster.matmul_efficiency;
  c.matmul_efficiency = cluster.matmul_efficiency * c.modelled_seconds / c.measured_seconds;
  DUALPIPE_REQUIRE(c.matmul_efficiency <= 1, "--calibrate '", source, "': the run computed at ",
                   100 * c.matmul_efficiency, "% of the cluster's peak_tflops=", cluster.peak_tflops,
                   "; a rate above peak means peak_tflops is too low for this machine");
  cluster.matmul_efficiency = c.matmul_efficiency;

  // The parameters the run's busiest rank updated, from the memory model of its layout on a cluster of its size.
  c.between_steps_seconds = between_steps(trace, steps);
  if (c.between_steps_seconds > 0) {
    ClusterSpec run_cluster = cluster;
    run_cluster.gpus = run_cluster.gpus_per_node = l.pp;
    run_cluster.update_ns_per_parameter = 0;
    const LayoutResult run = evaluate_layout(model, run_cluster, micro_batch_size * trace.num_microbatches, l);
    const double slowdown = cluster.host_cores > 0 ? std::max(1.0, double(l.pp) / cluster.host_cores) : 1.0;
    c.update_ns_per_parameter = c.between_steps_seconds / slowdown / (run.memory.optimizer / 12) * 1e9;
    cluster.update_ns_per_parameter = c.update_ns_per_parameter;
  }
  return c;
}

}  // namespace dualpipe::layout
