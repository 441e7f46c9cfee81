// `dualpipe simulate`: time a schedule under a cost model and report bubble, memory and per-rank figures;
// `--kind all` compares every schedule that accepts the parameters.
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/schedule_limits.h"
#include "dualpipe/sim/result_json.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/sim/trace_costs.h"
#include "dualpipe/trace/trace.h"
#include "dualpipe/util/byte_size.h"
#include "dualpipe/util/error.h"
#include "output.h"
#include "plan_options.h"
#include "plan_output.h"

namespace dualpipe::cli {
namespace {

struct SimulateCommand {
  PlanOptions plan;
  std::string from_trace;  // the exchange time (a2a) from a dualpipe train trace
  std::string format = "table";
  std::string output;
};

// The comparison table's header: the common parameters and what the columns measure.
std::string comparison_header(const PlanOptions& plan, const CostModel& costs) {
  return "R=" + std::to_string(plan.ranks) + " ranks, M=" + std::to_string(plan.microbatches) +
         " micro-batches, costs " + costs.to_string() + " per 1/R of the model\n" +
         "(schedules with S > R stages run each stage at R/S of these costs; sorted by step time)\n"
         "step time = makespan; largest idle = max over ranks of (step time - busy); span rate = (max span"
         " - max busy) / max span,\nthe Zero Bubble paper's bubble rate; step rate = 1 - busy / (R x step "
         "time); peak act in stage activations on the worst rank,\nact/model the same as a share of the whole "
         "model's; chunks = stages held per rank; params = parameter copies per rank\n\n";
}

void run(const SimulateCommand& c) {
  check_output(c.output, {{"--from", c.plan.from_file}, {"--from-trace", c.from_trace}});
  CostModel costs = build_cost_model(c.plan);
  if (!c.from_trace.empty()) {
    const Trace trace = read_trace(c.from_trace);
    take_exchanges_from_trace(costs, trace, c.from_trace);
    take_waits_from_trace(costs, trace);
  }
  std::vector<SimulatedSchedule> results;
  std::vector<SkippedKind> skipped;
  const bool all = c.plan.from_file.empty() && c.plan.kind == "all";
  if (all) {
    // A --max-memory that cannot be read is the user's error for every kind, not "no schedule accepts R, M".
    if (!c.plan.max_memory.empty()) (void)parse_byte_size(c.plan.max_memory, "--max-memory");
    for (const GeneratorInfo& g : generators()) {
      // Only a kind that cannot serve R and M is skipped: costs the simulator refuses (too large) are the
      // user's error for every kind, not "no schedule accepts R, M".
      Schedule s;
      try {
        s = build_schedule(c.plan, std::string(g.name));
      } catch (const InvalidArgument& e) {
        skipped.push_back({std::string(g.name), e.what()});
        continue;
      }
      const CostModel scaled = costs_for_comparison(costs, s);
      Metrics m = simulate(s, scaled).metrics;
      results.push_back({std::move(s), scaled, std::move(m)});
    }
    if (results.empty()) {
      std::string reasons;
      for (const SkippedKind& s : skipped) reasons += "\n  " + s.kind + ": " + s.reason;
      throw InvalidArgument(
          detail::concat("no schedule accepts R=", c.plan.ranks, " M=", c.plan.microbatches, ":", reasons));
    }
    std::stable_sort(results.begin(), results.end(), faster);
  } else {
    Schedule s = build_schedule(c.plan);
    costs.check_stages(s.num_stages);
    Metrics m = simulate(s, costs).metrics;
    results.push_back({std::move(s), costs, std::move(m)});
  }

  if (c.format == "json") {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const SimulatedSchedule& r : results) out.push_back(simulated_json(r.schedule, r.costs, r.metrics));
    write_output(c.output, (all ? out : out.front()).dump(2) + "\n");
    for (const SkippedKind& s : skipped) std::cerr << "skipped " << s.kind << ": " << s.reason << "\n";
  } else if (all) {
    write_output(c.output, comparison_header(c.plan, costs) + comparison_table(results, skipped));
  } else {
    write_output(c.output, simulated_table(results.front()));
  }
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto [sub, command] = add_command<SimulateCommand>(app, "simulate", run,
      "Simulate a schedule: step time, largest idle, bubble rates, per-rank busy/idle/span, peak activations");
  add_plan_options(*sub, command->plan, true, true);
  sub->get_option("--kind")->description("Schedule kind, or 'all' to compare every schedule that accepts R and M");
  sub->add_option("--from-trace", command->from_trace,
                  "Take a2a from a dualpipe train --trace of an MoE run: 2 x layers (the cost key) x the median "
                  "all-to-all the ranks waited for whole, in milliseconds (give the other costs in milliseconds). "
                  "An a2a in --cost is then the exchanges' bytes at the link's rate, and what the measured exchange "
                  "takes beyond its share is its latency (a2a_latency, unless given); and, unless given, gap and "
                  "comm: the mean time from a rank's action's end to its next one's start where that one's inputs "
                  "were there, and the mean wait for an input from another rank where the consumer's rank was idle")
      ->check(CLI::ExistingFile);
  add_format_and_output(*sub, command->format, command->output);
  sub->footer(R"(Examples:
  dualpipe simulate --kind all --ranks 8 --microbatches 16
  dualpipe simulate --kind dualpipev --ranks 4 -m 16 --cost F=10,B=20,W=10,layers=1 --from-trace run.json
  dualpipe simulate --kind dualpipe --ranks 4 --microbatches 8 --cost F=1,B=2,W=1,FB=2.5 --format json
  dualpipe simulate --from my_schedule.txt)");
}

}  // namespace dualpipe::cli
