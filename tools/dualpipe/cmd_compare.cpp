// `dualpipe compare`: a measured step (from a trace written by `dualpipe train` or any runtime program) beside
// its plan, the trace's own schedule simulated with costs fitted from that step (or --cost, in microseconds):
// per-rank busy, idle and span, makespan, bubble and bubble rate, as docs/schedules.md defines them. With
// fitted costs, what differs between the two columns is waiting and variation, not the cost model.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "dualpipe/sim/reduction_figures.h"
#include "dualpipe/sim/result_json.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/sim/trace_costs.h"
#include "dualpipe/trace/trace.h"
#include "dualpipe/util/error.h"
#include "dualpipe/viz/timeline.h"
#include "dualpipe/viz/trace_timeline.h"
#include "output.h"
#include "plan_options.h"
#include "plan_output.h"
#include "dualpipe/trace/trace_plan.h"

namespace dualpipe::cli {
namespace {

struct CompareCommand {
  std::string trace;
  int step = -1;
  std::string cost;
  std::string rank_speed;  // --rank-speed, with --cost
  std::string format = "table";
  std::string output;
};

// The spec's figures of one side (measured or planned, in microseconds): StepFigures.
nlohmann::ordered_json to_json(const StepFigures& f) {
  nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
  for (size_t r = 0; r < f.per_rank.size(); ++r)
    ranks.push_back({{"rank", r}, {"busy", f.per_rank[r].busy}, {"idle", f.per_rank[r].idle},
                     {"span", f.per_rank[r].span}});
  return {{"makespan", f.makespan}, {"bubble", f.bubble}, {"bubble_rate", f.bubble_rate}, {"per_rank", ranks}};
}

std::string us(double v) { return formatted("%.1f", v); }

nlohmann::ordered_json reductions_json(const ReductionFigures& measured, const ReductionFigures& planned) {
  nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
  for (size_t r = 0; r < planned.last_end.size(); ++r)
    ranks.push_back(
        {{"rank", r}, {"measured_last_end", measured.last_end[r]}, {"plan_last_end", planned.last_end[r]}});
  return {{"measured_reductions", measured.reductions}, {"plan_reductions", planned.reductions},
          {"measured_step", measured.step}, {"plan_step", planned.step}, {"per_rank", ranks}};
}

std::string ratio(double measured, double planned) {
  if (planned <= 0) return "-";
  return formatted("%.2fx", measured / planned);
}

// The data-parallel reductions' rows: when each rank's last one completed, and the step until the last one did.
std::string reductions_table(const ReductionFigures& measured, const ReductionFigures& planned,
                             const CostModel& costs) {
  std::string out = formatted("\ndata-parallel reductions (REDUCE_GRAD): %d measured with their completion, %d planned "
                              "at reduce=%s us\n", measured.reductions, planned.reductions, us(costs.reduce).c_str());
  out += formatted("%4s  %22s %10s\n", "rank", "last reduction ends us", "plan");
  for (size_t r = 0; r < planned.last_end.size(); ++r)
    out += formatted("%4zu  %22s %10s\n", r, us(measured.last_end[r]).c_str(), us(planned.last_end[r]).c_str());
  out += formatted("%-12s %12s %12s %15s\n", "step us", us(measured.step).c_str(), us(planned.step).c_str(),
                   ratio(measured.step, planned.step).c_str());
  return out;
}

// "+0.0%" never "-0.0%": a rate of zero printed with the sign of a rounding error reads as a finding.
std::string percent(double rate) { return formatted("%.1f%%", 100 * rate + 0.0); }

// The plan's costs: --cost as given, or fitted to the step with the fit's residual and warnings.
struct PlanCosts {
  CostModel costs;
  std::optional<CostFit> fit;  // empty with --cost
};

PlanCosts plan_costs(const CompareCommand& c, const Trace& trace, int step) {
  DUALPIPE_REQUIRE(c.rank_speed.empty() || !c.cost.empty(), "--rank-speed needs --cost: costs fitted to the trace "
                   "already carry each rank's speed");
  if (!c.cost.empty()) {
    CostModel costs = CostModel::parse(c.cost);
    if (!c.rank_speed.empty()) costs.rank_speed = parse_rank_speed(c.rank_speed);
    return {costs, std::nullopt};
  }
  CostFit fit = fit_costs(trace, step);
  return {fit.costs, std::move(fit)};
}

std::string describe_costs(const PlanCosts& p) {
  if (!p.fit) return "plan: the trace's schedule simulated with the costs given by --cost (microseconds):\n  " +
                     p.costs.to_string() + "\n";
  std::string out = "plan: the trace's schedule simulated with each stage's mean F, B, W and F&B durations in the "
                    "step (microseconds):\n  " + p.costs.to_string() + "\n" +
                    formatted("fit residual: %.1f%% (root mean square of each action's deviation from its stage's "
                           "mean)\n", 100 * p.fit->residual);
  for (const std::string& w : p.fit->warnings) out += "warning: " + w + "\n";
  return out;
}

nlohmann::ordered_json fit_json(const PlanCosts& p) {
  if (!p.fit) return nullptr;
  return {{"residual", p.fit->residual}, {"warnings", p.fit->warnings}};
}

void run(const CompareCommand& c) {
  check_output(c.output, {{"--trace", c.trace}});
  const Trace trace = read_trace(c.trace);
  const int step = pick_step(trace, c.trace, c.step, "compare");
  const Schedule plan = plan_of_trace(trace, c.trace, "there is no plan to compare with");
  check_trace_step(trace, plan, step, c.trace);
  const PlanCosts costs = plan_costs(c, trace, step);
  costs.costs.check();
  const Timeline measured_timeline = timeline_from_trace(trace, step);
  const StepFigures measured = step_figures(compute_intervals(measured_timeline));
  const Simulation simulation = simulate(plan, costs.costs);
  const StepFigures planned = simulation.metrics.figures();
  const ReductionFigures planned_dp = planned_reductions(plan, simulation);
  const ReductionFigures measured_dp = measured_reductions(trace, step, plan.num_ranks);
  DUALPIPE_REQUIRE(measured.per_rank.size() == planned.per_rank.size(), "trace '", c.trace, "' has events of ",
                   measured.per_rank.size(), " ranks but its schedule has ", planned.per_rank.size());

  if (c.format == "json") {
    nlohmann::ordered_json out = {{"trace", c.trace},
                                  {"kind", plan.kind},
                                  {"ranks", plan.num_ranks},
                                  {"stages", plan.num_stages},
                                  {"microbatches", plan.num_microbatches},
                                  {"step", step},
                                  {"time_unit", "us"},
                                  {"costs", costs_json(costs.costs)},
                                  {"costs_text", costs.costs.to_string()},
                                  {"costs_source", costs.fit ? "fitted" : "given"},
                                  {"fit", fit_json(costs)},
                                  {"measured", to_json(measured)},
                                  {"plan", to_json(planned)},
                                  {"data_parallel", planned_dp.reductions == 0
                                                        ? nlohmann::ordered_json(nullptr)
                                                        : reductions_json(measured_dp, planned_dp)}};
    write_output(c.output, out.dump(2) + "\n");
    return;
  }
  std::string out = plan.kind + ": R=" + std::to_string(plan.num_ranks) + " ranks, S=" +
                    std::to_string(plan.num_stages) + " stages, M=" + std::to_string(plan.num_microbatches) +
                    " micro-batches; step " + std::to_string(step) + " of '" + c.trace + "'\n" +
                    describe_costs(costs) + "\n";
  out += formatted("%4s  %10s %10s  %10s %10s  %10s %10s\n", "", "busy us", "", "idle us", "", "span us", "");
  out += formatted("%4s  %10s %10s  %10s %10s  %10s %10s\n", "rank", "measured", "plan", "measured", "plan",
                "measured", "plan");
  for (size_t r = 0; r < measured.per_rank.size(); ++r) {
    const RankFigures &m = measured.per_rank[r], &p = planned.per_rank[r];
    out += formatted("%4zu  %10s %10s  %10s %10s  %10s %10s\n", r, us(m.busy).c_str(), us(p.busy).c_str(),
                  us(m.idle).c_str(), us(p.idle).c_str(), us(m.span).c_str(), us(p.span).c_str());
  }
  out += formatted("\n%-12s %12s %12s %15s\n", "", "measured", "plan", "measured/plan");
  out += formatted("%-12s %12s %12s %15s\n", "makespan us", us(measured.makespan).c_str(),
                us(planned.makespan).c_str(), ratio(measured.makespan, planned.makespan).c_str());
  out += formatted("%-12s %12s %12s %15s\n", "bubble us", us(measured.bubble).c_str(), us(planned.bubble).c_str(),
                ratio(measured.bubble, planned.bubble).c_str());
  out += formatted("%-12s %12s %12s %15s\n", "bubble rate", percent(measured.bubble_rate).c_str(),
                percent(planned.bubble_rate).c_str(), ratio(measured.bubble_rate, planned.bubble_rate).c_str());
  if (planned_dp.reductions > 0)
    out += reductions_table(measured_dp, planned_dp, costs.costs);
  out += "\nbusy = sum of compute durations, idle = makespan - busy, span = last end - first start on the rank;\n"
         "bubble = max idle, bubble rate = (max span - max busy) / max span (docs/schedules.md, \"Metrics\")\n";
  write_output(c.output, out);
}

}  // namespace

void add_compare_command(CLI::App& app) {
  auto [sub, command] = add_command<CompareCommand>(app, "compare", run,
      "Compare a measured step (trace JSON) with its simulated plan: per-rank busy, idle, span, "
      "makespan, bubble, bubble rate side by side");
  sub->add_option("--trace", command->trace, "Trace JSON of a measured run (docs/trace-format.md)")->required();
  add_step_option(*sub, command->step, "compare");
  sub->add_option("--cost", command->cost,
                  "Plan costs in microseconds instead of the fitted ones: F=..,B=..,W=..,FB=..,comm=..");
  sub->add_option("--rank-speed", command->rank_speed,
                  "With --cost: a speed per pipeline rank, like 1,1,0.67,1 (a rank's compute takes 1/speed times its "
                  "cost), as the run had them");
  add_format_and_output(*sub, command->format, command->output);
  sub->footer(R"(The plan is the trace's own schedule (dualpipe.schedule) simulated with each stage's mean F, B, W and
F&B durations in the step (or --cost, in microseconds), so the columns differ by waiting and variation;
the fit residual says how much the actions varied around those means. With data parallelism the plan's
REDUCE_GRAD actions take the data-parallel link's reduce fitted to the step's measured reductions, and
both sides show when each rank's last reduction ended and the step until then.
Examples:
  dualpipe train --trace run.json && dualpipe compare --trace run.json
  dualpipe compare --trace run.json --step 3 --format json)");
}

}  // namespace dualpipe::cli
