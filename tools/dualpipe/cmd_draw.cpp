// `dualpipe draw`: timeline pictures (SVG, or HTML with tooltips) of a planned schedule, of several schedules
// on one time axis (--compare), or of a measured run from its trace (--trace), optionally over its plan.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "dualpipe/util/printable.h"
#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/schedule_file.h"
#include "dualpipe/schedule/validate.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/sim/trace_costs.h"
#include "dualpipe/trace/trace.h"
#include "dualpipe/util/atomic_file.h"
#include "dualpipe/util/error.h"
#include "dualpipe/util/output_paths.h"
#include "dualpipe/viz/html.h"
#include "dualpipe/viz/svg.h"
#include "dualpipe/viz/timeline.h"
#include "dualpipe/viz/trace_timeline.h"
#include "output.h"
#include "plan_options.h"
#include "dualpipe/trace/trace_plan.h"

namespace dualpipe::cli {
namespace {

struct DrawCommand {
  PlanOptions plan;
  std::string output = "timeline.svg";
  std::string compare;
  std::string trace;
  bool with_plan = false;
  int step = -1;
  int width = 0;
};

struct Picture {
  std::vector<Timeline> timelines;
  SvgOptions options;
};

std::vector<std::string> split_kinds(const std::string& list) {
  std::vector<std::string> kinds;
  if (list == "all") {
    for (const GeneratorInfo& g : generators()) kinds.emplace_back(g.name);
    return kinds;
  }
  std::size_t begin = 0;
  while (begin <= list.size()) {
    const std::size_t comma = std::min(list.find(',', begin), list.size());
    const std::string kind = list.substr(begin, comma - begin);
    DUALPIPE_REQUIRE(!kind.empty(), "--compare '", list, "': expected kinds separated by commas, or 'all'");
    kinds.push_back(kind);
    begin = comma + 1;
  }
  return kinds;
}

// Refuses a schedule too large to draw before it is simulated (the picture would be refused anyway).
void require_drawable(const Schedule& s, std::size_t already) {
  std::size_t cells = already;
  for (const auto& rank_actions : s.actions)
    for (const Action& a : rank_actions) cells += a.is_compute();
  DUALPIPE_REQUIRE(cells <= kMaxSvgCells, "a picture of ", cells, " actions is above the limit of ", kMaxSvgCells,
                   " actions per picture (draw fewer ranks or micro-batches; docs/limits.md)");
}

Picture draw_plan(const DrawCommand& c) {
  Schedule schedule = c.plan.from_file.empty() ? build_schedule(c.plan) : read_schedule_file(c.plan.from_file);
  if (!c.plan.from_file.empty()) {  // read as it is (its kind kept), unlike build_schedule's plan files
    validate(schedule);
    schedule = with_data_parallel_actions(c.plan, schedule);
  }
  require_drawable(schedule, 0);
  const CostModel costs = build_cost_model(c.plan);
  const Timeline t = timeline_from_simulation(schedule, simulate(schedule, costs), costs);
  Picture p{{t}, {}};
  p.options.subtitle.push_back("costs " + costs.to_string() + " (time in cost units)");
  return p;
}

// Several schedules on one axis. The costs are those of a 1/R slice of the model, as in `simulate --kind all`.
// With 'all' a kind that cannot serve the parameters is skipped with a note; a kind named explicitly must work.
Picture draw_comparison(const DrawCommand& c) {
  DUALPIPE_REQUIRE(c.plan.from_file.empty(), "--compare draws generated schedules; it cannot be combined with --from");
  const bool all = c.compare == "all";
  const CostModel costs = build_cost_model(c.plan);
  Picture p;
  std::vector<std::string> skipped;
  for (const std::string& kind : split_kinds(c.compare)) {
    // Only a kind that cannot serve R and M is skipped: costs the simulator refuses (too large) are the
    // user's error for every kind, not "no schedule accepts R, M".
    Schedule s;
    try {
      s = build_schedule(c.plan, kind);
    } catch (const InvalidArgument& e) {
      if (!all) throw InvalidArgument(detail::concat("--compare: ", kind, ": ", e.what()));
      skipped.push_back(detail::concat(kind, " (", e.what(), ")"));
      std::cerr << "dualpipe draw: skipped " << kind << ": " << printable_message(e.what()) << "\n";
      continue;
    }
    std::size_t drawn = 0;
    for (const Timeline& t : p.timelines) drawn += t.num_cells();
    require_drawable(s, drawn);
    const CostModel scaled = costs_for_comparison(costs, s);
    Timeline t = timeline_from_simulation(s, simulate(s, scaled), scaled);
    t.title = detail::concat(kind, " (S=", s.num_stages, ")");
    p.timelines.push_back(std::move(t));
  }
  DUALPIPE_REQUIRE(!p.timelines.empty(), "--compare all: no schedule accepts R=", c.plan.ranks,
                   " M=", c.plan.microbatches);
  p.options.title = detail::concat(p.timelines.size(), " schedules compared: ", c.plan.ranks, " ranks, ",
                                   c.plan.microbatches, " micro-batches");
  p.options.subtitle.push_back("costs " + costs.to_string() + " per 1/R of the model (time in cost units); " +
                               "schedules with S > R stages run each stage at R/S of these costs");
  for (const std::string& s : skipped) p.options.notes.push_back("skipped: " + s);
  return p;
}

// A measured step; with the plan under it, simulated with the run's own mean durations (or --cost, read
// as microseconds), so what differs between the two rows is waiting and variation, not the cost model.
Picture draw_trace(const DrawCommand& c) {
  const Trace trace = read_trace(c.trace);
  const int step = pick_step(trace, c.trace, c.step, "draw");
  Picture p;
  p.timelines.push_back(timeline_from_trace(trace, step));
  const Timeline& measured = p.timelines.front();
  if (!c.with_plan) return p;

  Schedule plan = plan_of_trace(trace, c.trace, "there is no plan to draw under it (leave out --with-plan)");
  check_trace_step(trace, plan, step, c.trace);
  if (trace.kind.empty()) plan.kind = "plan";
  std::optional<CostFit> fit;
  if (c.plan.cost.empty()) fit = fit_costs(trace, step);
  const CostModel costs = fit ? fit->costs : build_cost_model(c.plan);
  Timeline planned = timeline_from_simulation(plan, simulate(plan, costs), costs);
  planned.time_unit = "us";
  planned.summary = describe_stats(planned.stats, planned.time_unit);
  planned.title = "plan: " + planned.title;
  const double drift = planned.stats.makespan > 0 ? measured.stats.makespan / planned.stats.makespan - 1 : 0;
  p.options.title = measured.title + ", with its plan";
  const auto us = [](double v) { return format_time(v, "us"); };
  p.options.subtitle.push_back(detail::concat(
      "plan simulated with ", fit ? "each stage's mean durations in the step" : "--cost in microseconds",
      ": F ", us(costs.forward), ", I ", us(costs.backward - costs.weight), ", W ", us(costs.weight), ", F&B ",
      us(costs.overlapped_pair()), costs.stage_forward.empty() ? "" : " (means over the stages)",
      fit ? detail::concat("; fit residual ", static_cast<int>(std::lround(fit->residual * 1000)) / 10.0, "%") : ""));
  if (fit)
    for (const std::string& w : fit->warnings) p.options.subtitle.push_back("warning: " + w);
  p.options.subtitle.push_back(detail::concat("measured makespan ", us(measured.stats.makespan), " vs planned ",
                                              us(planned.stats.makespan), " (", drift >= 0 ? "+" : "",
                                              static_cast<int>(std::lround(drift * 1000)) / 10.0, "%)"));
  p.timelines.push_back(std::move(planned));
  return p;
}

void run(const DrawCommand& c) {
  picture_format(c.output);  // refused before any work
  DUALPIPE_REQUIRE(c.compare.empty() || c.trace.empty(), "--compare and --trace cannot be combined");
  DUALPIPE_REQUIRE(!c.with_plan || !c.trace.empty(), "--with-plan draws the plan under a measured run: give --trace FILE");
  DUALPIPE_REQUIRE(c.step < 0 || !c.trace.empty(), "--step picks a step of a measured run: give --trace FILE");
  DUALPIPE_REQUIRE(c.width == 0 || c.width >= kMinSvgWidth, "--width must be at least ", kMinSvgWidth,
                   " pixels, got ", c.width);
  DUALPIPE_REQUIRE(c.width <= kMaxSvgWidth, "--width ", c.width, " is above the limit of ", kMaxSvgWidth,
                   " pixels (docs/limits.md)");
  check_can_write_file(c.output);
  check_outputs_apart({{"--trace", c.trace}, {"--from", c.plan.from_file}}, {{"-o", c.output}});
  Picture p = !c.trace.empty() ? draw_trace(c) : !c.compare.empty() ? draw_comparison(c) : draw_plan(c);
  p.options.width = c.width;
  write_file_atomically(c.output, render_picture(c.output, p.timelines, p.options));
  std::size_t cells = 0;
  for (const Timeline& t : p.timelines) cells += t.num_cells();
  write_stdout(detail::concat("wrote ", c.output, " (", p.timelines.size(), " timeline",
                              p.timelines.size() > 1 ? "s" : "", ", ", cells, " actions)\n"));
}

}  // namespace

void add_draw_command(CLI::App& app) {
  auto [sub, command] = add_command<DrawCommand>(app, "draw", run,
      "Draw a timeline picture (SVG, or HTML with a tooltip per action) of a schedule, a comparison "
      "or a measured run");
  add_plan_options(*sub, command->plan, true, true);
  sub->add_option("-o,--output", command->output, "Picture file: *.svg, or *.html for a page with tooltips")
      ->capture_default_str();
  sub->add_option("--compare", command->compare,
                  "Stack several schedules on one time axis: K1,K2,... or 'all' (kinds that cannot serve R and M "
                  "are skipped with a note)");
  sub->add_option("--trace", command->trace, "Draw a measured run from its trace JSON (docs/trace-format.md)");
  sub->add_flag("--with-plan", command->with_plan,
                "With --trace: draw the plan under the measured run, on the same time scale");
  add_step_option(*sub, command->step, "draw (with --trace)");
  sub->add_option("--width", command->width,
                  "Picture width in pixels (default: wide enough for every micro-batch number)");
  sub->footer(R"(Examples:
  dualpipe draw --kind dualpipe --ranks 8 --microbatches 20 -o dualpipe.svg
  dualpipe draw --compare all --ranks 8 --microbatches 16 -o compare.html
  dualpipe draw --trace run.json --with-plan -o run.svg)");
}

}  // namespace dualpipe::cli
