// `dualpipe plan`: the schedule with the smallest step time (or per-rank span) within a memory limit, searched
// across the hand-made families and automatic schedules (planner.h); printed as a table, json (the fields of
// `simulate --format json`), text or csv, which `simulate --from` and `train --schedule-file` read back.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "dualpipe/schedule/pytorch_csv.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/schedule/validate.h"
#include "dualpipe/sim/kineto_plan.h"
#include "dualpipe/sim/kineto_report.h"
#include "dualpipe/sim/layer_partition.h"
#include "dualpipe/sim/plan_request.h"
#include "dualpipe/sim/planner.h"
#include "dualpipe/sim/result_json.h"
#include "dualpipe/sim/trace_costs.h"
#include "dualpipe/trace/trace.h"
#include "dualpipe/util/atomic_file.h"
#include "dualpipe/util/byte_size.h"
#include "dualpipe/util/error.h"
#include "dualpipe/util/file_input.h"
#include "dualpipe/sim/plan_file.h"
#include "dualpipe/util/output_paths.h"
#include "kineto_options.h"
#include "output.h"
#include "plan_options.h"
#include "plan_output.h"

namespace dualpipe::cli {
namespace {

struct PlanCommand {
  int ranks = 4;
  int microbatches = 8;
  std::string cost;
  std::string rank_speed;  // --rank-speed
  std::string memory_limit;  // "8" (1/R slice activations) or "24GiB" (bytes, with act_bytes)
  std::string objective = "makespan";
  std::string format = "table";
  std::string output;
  std::string from_trace;
  std::vector<std::string> from_kineto;
  KinetoReadOptions kineto_read;
  KinetoCostNames kineto_names;
  std::optional<KinetoRun> kineto;  // what --from-kineto read
  bool families_only = false;
  std::vector<std::string> placements;
  std::string layer_costs;
  std::string max_memory;  // empty: the default limit
  const CLI::Option* ranks_option = nullptr;
  const CLI::Option* microbatches_option = nullptr;
};

std::string two_copies_warning(const PlanCandidate& best) {
  if (parameter_copies(best) <= 1) return {};
  return "note: " + best.name + " holds two copies of the parameters on every rank (a two-direction "
         "placement); --placements linear,v,looped keeps to one copy\n";
}

// The traced run's schedule, its measured step and the step simulated at the costs its traces measured.
nlohmann::ordered_json traced_run_json(const KinetoRun& run) {
  nlohmann::ordered_json out = kineto_costs_json(&run.costs);
  out["time_unit"] = "us";
  out["measured_step"] = run.measured_step;
  out["slowest_rank"] = run.slowest_rank;
  if (run.schedule) {
    out["schedule"] = run.schedule->kind;
    out["simulated_pipeline"] = run.simulated_pipeline;
    out["update"] = run.costs.update;
    out["rank_updates"] = run.costs.rank_updates;
    out["simulated_step"] = run.simulated_step;
    out["simulated_draws"] = run.simulated_draws;
    // null where the traces measured no step (no ProfilerStep, and work of no duration)
    out["simulated_error"] = run.measured_step > 0 ? nlohmann::ordered_json(run.simulated_step / run.measured_step - 1)
                                                   : nlohmann::ordered_json();
  }
  if (run.shared_cores) {
    const SharedCores& s = *run.shared_cores;
    out["shared_cores"] = {{"host", s.host}, {"cores", s.cores}, {"ranks", s.ranks},
                           {"measured_slowdown", s.measured_slowdown}, {"simulated_slowdown", s.simulated_slowdown}};
  }
  return out;
}

std::string traced_run_text(const KinetoRun& run) {
  std::string text = kineto_costs_text(run.costs);
  if (!run.schedule)
    return text + "(the traces name no schedule: `dualpipe train --kineto-trace` records the one it ran)\n";
  // A step of 0 (ProfilerStep regions of no duration) is no measurement to compare with.
  const std::string measured =
      run.measured_step > 0
          ? formatted("measured step %.3f ms (median ProfilerStep of rank %d, the slowest); predicted at these costs "
                      "%.3f ms (%+.1f%%)",
                      run.measured_step / 1e3, run.slowest_rank, run.simulated_step / 1e3,
                      100 * (run.simulated_step / run.measured_step - 1))
          : formatted("no step measured (the traces' steps last 0 ms); predicted at these costs %.3f ms",
                      run.simulated_step / 1e3);
  const std::optional<SharedCores>& cores = run.shared_cores;
  const std::string shared =
      cores ? formatted(" on %d shared cores (x%.2f slower than alone)", cores->cores, cores->simulated_slowdown) : "";
  const std::string draws =
      run.simulated_draws > 1
          ? formatted(" (the median of %d simulations, each action's time drawn from the traces' spread around its "
                      "mean)", run.simulated_draws)
          : "";
  return text + formatted("traced run: %s, R=%d, M=%d: %s: the schedule simulated %.3f ms%s, then each rank's "
                          "update%s\n",
                          run.schedule->kind.c_str(), run.schedule->num_ranks, run.schedule->num_microbatches,
                          measured.c_str(), run.simulated_pipeline / 1e3, shared.c_str(), draws.c_str());
}

std::string render(const PlanCommand& c, const Plan& plan, const PlanRequest& request) {
  if (c.format == "text") return format_plan_file(plan.best);
  if (c.format == "csv") return format_pytorch_csv(plan.best.schedule);
  if (c.format != "json") return {};
  nlohmann::ordered_json out = plan_json(plan, request);
  if (c.kineto) out["from_kineto"] = traced_run_json(*c.kineto);
  return out.dump(2) + "\n";
}

std::string plan_table(const PlanCommand& c, const Plan& plan, const PlanRequest& request) {
  std::string out =
      "plan for R=" + std::to_string(c.ranks) + " ranks, M=" + std::to_string(c.microbatches) + " micro-batches, costs " +
      plan.best.costs.to_string() + " per stage of the chosen schedule\n" + "objective: " +
      (c.objective == "span" ? "largest per-rank span" : "step time (makespan)") + ", memory limit: " +
      (request.memory_limit ? c.memory_limit + " (" + shortest_fixed(*request.memory_limit) +
                                  " activations of a 1/R slice)"
                            : std::string("none")) +
      " (feasible minimum " + shortest_fixed(plan.minimum_memory) + "), " + std::to_string(plan.evaluated) +
      " schedules simulated\n" +
      (!c.from_trace.empty() ? "times in microseconds, costs fitted from '" + c.from_trace + "'\n\n"
       : c.kineto           ? "times in microseconds, costs read from the profiler traces\n" +
                                   traced_run_text(*c.kineto) + "\n"
                            : std::string("times in the costs' units\n\n"));
  SimulatedSchedule chosen{plan.best.schedule, plan.best.costs, plan.best.metrics};
  chosen.schedule.kind = plan.best.name;
  out += simulated_table(chosen);
  out += "\npeak activations of the plan: " + shortest_fixed(plan.best.peak) +
         " activations of a 1/R slice (the unit of --memory-limit)\n";
  out += two_copies_warning(plan.best);
  if (!plan.best.layers_per_stage.empty()) {
    out += "\nlayers per stage: " + format_cut(plan.best.layers_per_stage) + " (dualpipe train --layers-per-stage " +
           format_cut(plan.best.layers_per_stage) + ")\n";
  }
  out += "\nbest of each kind within the limit (peak act in 1/R slice activations):\n";
  out += formatted("%-28s %3s %12s %12s %10s %10s %9s %6s\n", "schedule", "S", "step time", "max span", "span rate",
                "step rate", "peak act", "params");
  for (const PlanCandidate& k : plan.candidates) {
    double span = 0;
    for (const RankMetrics& r : k.metrics.per_rank) span = std::max(span, r.span);
    out += formatted("%-28s %3d %12s %12s %9s%% %9s%% %9s %5sx\n", k.name.c_str(), k.schedule.num_stages,
                  fixed(k.metrics.makespan, 2).c_str(), fixed(span, 2).c_str(),
                  fixed(100 * k.metrics.bubble_rate, 2).c_str(), fixed(100 * k.metrics.step_bubble_rate, 2).c_str(),
                  shortest_fixed(k.peak).c_str(), shortest_fixed(parameter_copies(k), 2).c_str());
  }
  return out;
}

// A measured run's R and M are the plan's: a --ranks or --microbatches that says otherwise is a mistake, not a wish.
void adopt_run_shape(PlanCommand& c, int ranks, int microbatches, const std::string& source) {
  DUALPIPE_REQUIRE(c.ranks_option->count() == 0 || c.ranks == ranks, "--ranks ", c.ranks, " contradicts ", source,
                   ", a run of ", ranks, " ranks (leave --ranks out)");
  DUALPIPE_REQUIRE(c.microbatches_option->count() == 0 || c.microbatches == microbatches, "--microbatches ",
                   c.microbatches, " contradicts ", source, ", a run of ", microbatches,
                   " micro-batches (leave --microbatches out)");
  c.ranks = ranks;
  c.microbatches = microbatches;
}

void run(PlanCommand& c) {
  // Refused before the work, leaving nothing behind.
  std::vector<NamedPath> files = {{"--from-trace", c.from_trace}, {"--layer-costs", c.layer_costs}};
  for (const std::string& path : c.from_kineto) files.push_back({"--from-kineto", path});
  check_output(c.output, files);
  PlanInputs inputs;
  DUALPIPE_REQUIRE(c.from_trace.empty() || c.from_kineto.empty(), "--from-trace and --from-kineto are two sources of "
                   "the same costs: give one");
  DUALPIPE_REQUIRE(c.cost.empty() || (c.from_trace.empty() && c.from_kineto.empty()), "--",
                   c.from_trace.empty() ? "from-kineto" : "from-trace",
                   " reads the costs of the run; it cannot be combined with --cost");
  if (!c.from_trace.empty()) {
    const SliceCosts fitted = slice_costs_from_trace(read_trace(c.from_trace), c.from_trace);
    for (const std::string& w : fitted.warnings) std::cerr << "warning: fitting '" << c.from_trace << "': " << w << "\n";
    inputs.costs = fitted.costs;
    adopt_run_shape(c, fitted.ranks, fitted.microbatches, "--from-trace '" + c.from_trace + "'");
  } else if (!c.from_kineto.empty()) {
    c.kineto_names.check();
    c.kineto = read_kineto_run(read_kineto_ranks(c.from_kineto, c.kineto_read), c.kineto_names, c.ranks);
    inputs.costs = c.kineto->costs.costs;
    if (const std::optional<Schedule>& ran = c.kineto->schedule)
      adopt_run_shape(c, ran->num_ranks, ran->num_microbatches, "--from-kineto (the schedule the traces ran)");
  } else {
    inputs.costs = CostModel::parse(c.cost);
  }
  if (!c.rank_speed.empty()) inputs.costs.rank_speed = parse_rank_speed(c.rank_speed);
  inputs.ranks = c.ranks;
  inputs.microbatches = c.microbatches;
  if (!c.max_memory.empty()) inputs.max_memory_bytes = parse_byte_size(c.max_memory, "--max-memory");
  inputs.objective = c.objective;
  if (!c.layer_costs.empty()) inputs.layers = read_layer_costs(c.layer_costs);
  if (!c.memory_limit.empty()) inputs.memory_limit = c.memory_limit;
  inputs.families_only = c.families_only;
  inputs.placements = c.placements;
  const PlanRequest request = plan_request(inputs, {"--objective", "--memory-limit"});
  const Plan plan = plan_schedule(request);
  validate(plan.best.schedule);
  write_output(c.output, c.format == "table" ? plan_table(c, plan, request) : render(c, plan, request));
  // A two-copy pick is worth a word on the terminal even when the table goes to a file or json is asked for.
  if (c.format != "table" || !c.output.empty()) std::cerr << two_copies_warning(plan.best);
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto [sub, command] = add_command<PlanCommand>(app, "plan", run,
      "Search the schedule with the smallest step time (or span) within a memory limit");
  command->ranks_option =
      sub->add_option("-r,--ranks", command->ranks, "Pipeline ranks (devices), R")->capture_default_str();
  command->microbatches_option =
      sub->add_option("-m,--microbatches", command->microbatches, "Micro-batches per step, M")->capture_default_str();
  sub->add_option("--max-memory", command->max_memory,
                  std::string("Memory the search may use, e.g. 4GiB (default 1GiB): larger requests are refused up "
                              "front. Units: ") + kByteUnitsHelp);
  sub->add_option("-c,--cost", command->cost,
                  "Costs of a 1/R slice of the model, as for simulate (F, B, W, FB, comm, scale with one multiplier "
                  "per slice, act_bytes, w_mem, recompute, input_mem)");
  sub->add_option("--rank-speed", command->rank_speed,
                  "A speed per pipeline rank, like 1,1,0.67,1: a rank's compute actions take 1/speed times their cost "
                  "there; with --layer-costs each schedule's cut moves layers off the slow ranks");
  sub->add_option("--memory-limit", command->memory_limit,
                  std::string("Peak live activations per rank: a number of 1/R slice activations (one micro-batch), or "
                              "bytes with a unit given act_bytes: ") + kByteUnitsHelp);
  sub->add_option("--objective", command->objective,
                  "makespan (step time) or span (largest per-rank span, the Zero Bubble paper's objective)")
      ->check(CLI::IsMember({"makespan", "span"}))
      ->capture_default_str();
  add_format_and_output(*sub, command->format, command->output, {"table", "json", "text", "csv"},
                        "table, json, text or csv (text and csv: the schedule itself)");
  sub->add_option("--from-trace", command->from_trace,
                  "Fit the costs, R and M of a measured run (a dualpipe trace) and plan for them");
  sub->add_option("--from-kineto", command->from_kineto,
                  "Read the costs of a run from its PyTorch profiler traces: a trace, several, or a directory of one "
                  "per rank (dualpipe train --kineto-trace writes them, with the schedule that ran: its R and M, and "
                  "its step simulated beside the measured one)");
  add_kineto_options(*sub, command->kineto_read, command->kineto_names);
  sub->add_option("--layer-costs", command->layer_costs,
                  "Per-layer costs, one line per layer: F B W act_bytes (commas or blanks; a header line and # "
                  "comments allowed): each schedule gets the balanced cut of the layers into its stages");
  sub->add_flag("--families-only", command->families_only, "Compare the hand-made families only");
  sub->add_option("--placements", command->placements,
                  "Placements allowed, comma-separated: linear (stage s on rank s), v (2R stages in a V), two (two "
                  "directions: every stage on two ranks, twice the parameters), looped (interleaved) [all]")
      ->delimiter(',');
  sub->footer(R"(Examples:
  dualpipe plan --ranks 8 --microbatches 24 --cost F=1,B=2,W=1 --memory-limit 8
  dualpipe plan -r 8 -m 24 --cost F=18.522,B=27.423,W=9.337,comm=0.601,w_mem=0.366 --memory-limit 16 --objective span
  dualpipe plan -r 4 -m 8 --memory-limit 4 --format text -o plan.txt && dualpipe simulate --from plan.txt
  dualpipe plan --from-trace run.json --memory-limit 6
  dualpipe plan --from-kineto traces/     (dualpipe train --kineto-trace traces/))");
}

}  // namespace dualpipe::cli
