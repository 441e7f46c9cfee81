#include "dualpipe/layout/calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/sim/trace_costs.h"
#include "dualpipe/util/error.h"
#include "layout/pipeline_costs.h"
#include "dualpipe/sim/shared_cores.h"

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

struct StepTimes {
  double between = 0;  // a step's last compute end to the next step's first start
  double period = 0;   // a step's first start to the next step's
};

// The medians over the steps after the first that have a next one; zeros when the trace has fewer than 3 steps.
StepTimes step_times(const Trace& trace, const std::vector<int>& steps) {
  const auto first_start = [&](int step) {
    double start = std::numeric_limits<double>::infinity();
    for (const TraceEvent* e : step_compute_events(trace, step)) start = std::min(start, e->start);
    return start;
  };
  std::vector<double> gaps, periods;
  for (size_t k = 1; k + 1 < steps.size(); ++k) {
    double end = 0;
    for (const TraceEvent* e : step_compute_events(trace, steps[k])) end = std::max(end, e->start + e->duration);
    const double next = first_start(steps[k + 1]);
    gaps.push_back(std::max(0.0, next - end) * 1e-6);
    periods.push_back((next - first_start(steps[k])) * 1e-6);
  }
  if (gaps.empty()) return {};
  return {median(gaps), median(periods)};
}

// The matmul efficiency at which the model gives the measured time (FlashAttention's scaled with it, in proportion,
// at most 1). Only the products scale with it (memory-bound work and communication do not), so modelled(e) is
// about A / e + B: the step e' = e x modelled(e) / measured
// converges to A / (measured - B) where B < measured, in one step where B = 0 (a cluster without GPU figures).
// modelled_at(cluster) is the model's time for the run at the cluster's efficiency.
template <typename Modelled>
void fit_rate(Calibration& c, ClusterSpec& cluster, const Modelled& modelled_at) {
  c.stated_efficiency = cluster.matmul_efficiency;
  c.modelled_seconds = modelled_at(cluster);
  ClusterSpec trial = cluster;
  double efficiency = c.stated_efficiency, modelled = c.modelled_seconds;
  for (int step = 0; step < 50; ++step) {
    const double next = efficiency * modelled / c.measured_seconds;
    if (next > 1 || std::abs(next - efficiency) <= 1e-9 * efficiency) {
      efficiency = next;
      break;
    }
    trial.attention_efficiency = std::min(1.0, cluster.attention_efficiency * next / c.stated_efficiency);
    efficiency = trial.matmul_efficiency = next;
    modelled = modelled_at(trial);
  }
  c.matmul_efficiency = efficiency;
  DUALPIPE_REQUIRE(c.matmul_efficiency <= 1, "--calibrate '", c.source, "': the run computed at ",
                   100 * c.matmul_efficiency, "% of the cluster's peak_tflops=", cluster.peak_tflops,
                   "; a rate above peak means peak_tflops is too low for this machine");
  const double scale = c.matmul_efficiency / c.stated_efficiency;
  cluster.attention_efficiency = std::min(1.0, cluster.attention_efficiency * scale);
  cluster.matmul_efficiency = c.matmul_efficiency;
}

}  // namespace

Calibration calibrate_from_costs(const ModelSpec& model, ClusterSpec& cluster, const CostModel& costs, int stages,
                                 int micro_batch_size, const std::string& source) {
  model.check();
  cluster.check();
  costs.check();
  DUALPIPE_REQUIRE(micro_batch_size >= 1, "--calibrate-mbs must be >= 1, got ", micro_batch_size);
  DUALPIPE_REQUIRE(stages >= 1 && stages <= model.layers, "--calibrate-stages=", stages, " must be between 1 and the ",
                   model.layers, " layers of --model ", model.name);
  costs.check_stages(stages);
  Calibration c;
  c.source = source;
  Layout& l = c.layout;
  l.pp = stages, l.schedule = stages > 1 ? "1f1b" : "none";
  l.micro_batch_size = micro_batch_size, l.recompute = Recompute::None, l.zero = 0;
  c.measured_seconds = forward_plus_backward(costs, stages) * 1e-6;
  DUALPIPE_REQUIRE(c.measured_seconds > 0, "--calibrate '", source, "': the costs' F + B is 0");
  fit_rate(c, cluster, [&](const ClusterSpec& at) {
    return forward_plus_backward(pipeline_costs(model, at, l, false).costs, stages);
  });
  return c;
}

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
                   "' is not one of the generators'; calibrate on a run of a generated schedule");
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
  // Ranks beyond the host's cores measured their actions slowed by sharing them: compare with the model's
  // actions slowed alike (the slowdown depends on the schedule's shape, not on the rate).
  if (cluster.host_cores > 0 && l.pp > cluster.host_cores) {
    ScheduleOptions options;
    options.num_ranks = l.pp, options.num_microbatches = trace.num_microbatches;
    options.stages_per_rank = find_generator(l.schedule)->stages_per_rank == 0 ? l.vpp : 0;
    const CostModel modelled = pipeline_costs(model, cluster, l, false).costs;
    c.shared_cores_slowdown =
        simulate_on_shared_cores(make_schedule(l.schedule, options), modelled, 1, cluster.host_cores).mean_slowdown;
  }
  fit_rate(c, cluster, [&](const ClusterSpec& at) {
    return c.shared_cores_slowdown *
           forward_plus_backward(pipeline_costs(model, at, l, false).costs, trace.num_stages);
  });

  const StepTimes times = step_times(trace, steps);
  c.between_steps_seconds = times.between, c.step_seconds = times.period;
  if (times.period > 0) {
    // The run's layout on a cluster of its size: the parameters its busiest rank updated give the update rate,
    // and the step the model then predicts for it, against the measured one, the factor for the rest.
    ClusterSpec run_cluster = cluster;
    run_cluster.gpus = run_cluster.gpus_per_node = l.pp;
    run_cluster.update_ns_per_parameter = 0, run_cluster.step_time_factor = 1;
    const int batch = micro_batch_size * trace.num_microbatches;
    const LayoutResult run = evaluate_layout(model, run_cluster, batch, l);
    const double slowdown = cluster.host_cores > 0 ? std::max(1.0, double(l.pp) / cluster.host_cores) : 1.0;
    c.update_ns_per_parameter = c.between_steps_seconds / slowdown / (run.memory.optimizer / 12) * 1e9;
    run_cluster.update_ns_per_parameter = c.update_ns_per_parameter;
    c.modelled_step_seconds = evaluate_layout(model, run_cluster, batch, l).time.step;
    c.step_time_factor = c.step_seconds / c.modelled_step_seconds;
    cluster.update_ns_per_parameter = c.update_ns_per_parameter;
    cluster.step_time_factor = c.step_time_factor;
  }
  return c;
}

}  // namespace dualpipe::layout
