// `dualpipe simulate`: time a schedule under a cost model and report bubble, memory and per-rank figures;
// `--kind all` compares every schedule that accepts the parameters.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "dualpipe/error.h"
#include "dualpipe/generators.h"
#include "dualpipe/simulate.h"
#include "plan_options.h"

namespace dualpipe::cli {
namespace {

struct SimulateCommand {
  PlanOptions plan;
  std::string format = "table";
};

struct Result {
  Schedule schedule;
  CostModel costs;  // as simulated (scaled to the stage size in comparisons)
  Metrics metrics;
};

struct Skipped {
  std::string kind;
  std::string reason;
};

std::string fixed(double value, int decimals = 2) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

nlohmann::ordered_json result_json(const Result& r) {
  nlohmann::ordered_json per_rank = nlohmann::ordered_json::array();
  for (const RankMetrics& m : r.metrics.per_rank) {
    per_rank.push_back({{"rank", m.rank},
                        {"busy", m.busy},
                        {"idle", m.idle},
                        {"span", m.span},
                        {"peak_activations", m.peak_activations},
                        {"peak_activation_fraction", m.peak_activation_fraction},
                        {"peak_activation_bytes", m.peak_activation_bytes},
                        {"parameter_copies", m.parameter_copies}});
  }
  return {{"kind", r.schedule.kind},
          {"ranks", r.schedule.num_ranks},
          {"stages", r.schedule.num_stages},
          {"microbatches", r.schedule.num_microbatches},
          {"costs", r.costs.to_string()},
          {"makespan", r.metrics.makespan},
          {"bubble", r.metrics.bubble},
          {"bubble_rate", r.metrics.bubble_rate},
          {"peak_activations", r.metrics.peak_activations()},
          {"per_rank", per_rank}};
}

void print_one(const Result& r) {
  const CostModel& costs = r.costs;
  const Metrics& m = r.metrics;
  const Schedule& s = r.schedule;
  std::cout << s.kind << ": R=" << s.num_ranks << " ranks, S=" << s.num_stages << " stages, M="
            << s.num_microbatches << " micro-batches, costs " << costs.to_string() << "\n"
            << "makespan " << fixed(m.makespan) << "  bubble " << fixed(m.bubble) << "  bubble rate "
            << fixed(m.bubble_rate, 4) << "  peak activations " << m.peak_activations() << "\n\n";
  const bool bytes = costs.activation_bytes > 0;
  std::printf("%4s  %10s  %10s  %10s  %16s  %12s%s\n", "rank", "busy", "idle", "span", "peak activations",
              "stages held", bytes ? "  peak activation bytes" : "");
  for (const RankMetrics& rm : m.per_rank) {
    const std::string peak = std::to_string(rm.peak_activations) + " (" +
                             fixed(rm.peak_activation_fraction) + " model)";
    std::printf("%4d  %10s  %10s  %10s  %16s  %12d", rm.rank, fixed(rm.busy).c_str(), fixed(rm.idle).c_str(),
                fixed(rm.span).c_str(), peak.c_str(), rm.parameter_copies);
    if (bytes) std::printf("  %21.0f", rm.peak_activation_bytes);
    std::printf("\n");
  }
}

// The comparison table: one row per schedule, sorted by bubble, then the skipped kinds and why.
void print_comparison(const std::vector<Result>& results, const std::vector<Skipped>& skipped,
                      const PlanOptions& plan, const CostModel& costs) {
  std::cout << "R=" << plan.ranks << " ranks, M=" << plan.microbatches << " micro-batches, costs "
            << costs.to_string() << " per 1/R of the model\n"
            << "(schedules with S > R stages run each stage at R/S of these costs; sorted by bubble)\n\n";
  const bool bytes = costs.activation_bytes > 0;
  std::printf("%-17s %3s %9s %9s %11s %10s %9s %12s%s\n", "schedule", "S", "makespan", "bubble", "bubble rate",
              "peak act", "act/model", "stages held", bytes ? "  peak act bytes" : "");
  for (const Result& r : results) {
    const RankMetrics& worst = *std::max_element(
        r.metrics.per_rank.begin(), r.metrics.per_rank.end(),
        [](const RankMetrics& a, const RankMetrics& b) { return a.peak_activations < b.peak_activations; });
    int held = 0;
    for (const RankMetrics& rm : r.metrics.per_rank) held = std::max(held, rm.parameter_copies);
    std::printf("%-17s %3d %9s %9s %11s %10d %9s %12d", r.schedule.kind.c_str(), r.schedule.num_stages,
                fixed(r.metrics.makespan).c_str(), fixed(r.metrics.bubble).c_str(),
                fixed(r.metrics.bubble_rate, 4).c_str(), worst.peak_activations,
                fixed(worst.peak_activation_fraction).c_str(), held);
    if (bytes) std::printf("  %15.0f", worst.peak_activation_bytes);
    std::printf("\n");
  }
  if (!skipped.empty()) {
    std::cout << "\nskipped:\n";
    for (const Skipped& s : skipped) std::cout << "  " << s.kind << ": " << s.reason << "\n";
  }
}

void run(const SimulateCommand& c) {
  const CostModel costs = build_cost_model(c.plan);
  std::vector<Result> results;
  std::vector<Skipped> skipped;
  const bool all = c.plan.from_file.empty() && c.plan.kind == "all";
  if (all) {
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
    DUALPIPE_REQUIRE(!results.empty(), "no schedule accepts R=", c.plan.ranks, " M=", c.plan.microbatches);
    std::stable_sort(results.begin(), results.end(),
                     [](const Result& a, const Result& b) { return a.metrics.bubble < b.metrics.bubble; });
  } else {
    Schedule s = build_schedule(c.plan);
    Metrics m = simulate(s, costs).metrics;
    results.push_back({std::move(s), costs, std::move(m)});
  }

  if (c.format == "json") {
    if (!all) {
      std::cout << result_json(results.front()).dump(2) << "\n";
      return;
    }
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const Result& r : results) out.push_back(result_json(r));
    std::cout << out.dump(2) << "\n";
    for (const Skipped& s : skipped) std::cerr << "skipped " << s.kind << ": " << s.reason << "\n";
  } else if (all) {
    print_comparison(results, skipped, c.plan, costs);
  } else {
    print_one(results.front());
  }
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto command = std::make_shared<SimulateCommand>();
  CLI::App* sub = app.add_subcommand(
      "simulate", "Simulate a schedule: makespan, bubble, bubble rate, per-rank busy/idle/span, peak activations");
  sub->footer(
      "Examples:\n"
      "  dualpipe simulate --kind all --ranks 8 --microbatches 16\n"
      "  dualpipe simulate --kind dualpipe --ranks 4 --microbatches 8 --cost F=1,B=2,W=1,FB=2.5 --format json\n"
      "  dualpipe simulate --from my_schedule.txt");
  add_plan_options(*sub, command->plan, true, true);
  sub->get_option("--kind")->description("Schedule kind, or 'all' to compare every schedule that accepts R and M");
  sub->add_option("-f,--format", command->format, "Output form: table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  sub->callback([command] { run(*command); });
}

}  // namespace dualpipe::cli
