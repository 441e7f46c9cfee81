// `dualpipe schedule`: print a schedule in the text, PyTorch CSV or JSON form.
#include <iostream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "dualpipe/schedule/lower.h"
#include "dualpipe/schedule/pytorch_csv.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/util/error.h"
#include "output.h"
#include "plan_options.h"

namespace dualpipe::cli {
namespace {

struct ScheduleCommand {
  PlanOptions plan;
  std::string format = "text";
  bool lower = false;
  std::string output;
};

nlohmann::ordered_json placement_json(const Placement& p) {
  nlohmann::ordered_json rank_of_stage = nlohmann::ordered_json::array();
  for (int replica = 0; replica < p.num_replicas(); ++replica) {
    nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
    for (int s = 0; s < p.num_stages(); ++s) ranks.push_back(p.rank_of(replica, s));
    rank_of_stage.push_back(ranks);
  }
  nlohmann::ordered_json out = {{"replicas", p.num_replicas()}, {"rank_of_stage", rank_of_stage}};
  if (p.num_replicas() == 2) {
    nlohmann::ordered_json replica = nlohmann::ordered_json::array();
    for (int m = 0; m < p.num_microbatches(); ++m) replica.push_back(p.replica(m));
    out["replica_of_microbatch"] = replica;
  }
  return out;
}

std::string schedule_json(const Schedule& s) {
  nlohmann::ordered_json actions = nlohmann::ordered_json::array();
  for (const auto& rank_actions : s.actions) {
    nlohmann::ordered_json row = nlohmann::ordered_json::array();
    for (const Action& a : rank_actions) row.push_back(to_string(a));
    actions.push_back(row);
  }
  const nlohmann::ordered_json out = {{"kind", s.kind},
                              {"ranks", s.num_ranks},
                              {"stages", s.num_stages},
                              {"microbatches", s.num_microbatches},
                              {"placement", placement_json(s.placement)},
                              {"actions", actions}};
  return out.dump(2) + "\n";
}

// The schedule the options name: read within the reader's limits, or generated within the memory limit.
void run(const ScheduleCommand& c) {
  DUALPIPE_REQUIRE(!(c.lower && c.format == "csv"),
                   "--format csv is PyTorch's compute-only form; it cannot hold --lower's SEND/RECV");
  check_output(c.output, {{"--from", c.plan.from_file}});
  Schedule s = build_schedule(c.plan);
  if (c.lower) s = lower_communication(s);
  if (c.format == "text") {
    write_output(c.output, format_text(s));
  } else if (c.format == "csv") {
    write_output(c.output, format_pytorch_csv(s));
  } else {
    write_output(c.output, schedule_json(s));
  }
}

}  // namespace

void add_schedule_command(CLI::App& app) {
  auto command = std::make_shared<ScheduleCommand>();
  CLI::App* sub = app.add_subcommand("schedule", "Print the per-rank action order of a schedule");
  sub->footer("Example: dualpipe schedule --kind dualpipe --ranks 4 --microbatches 8");
  add_plan_options(*sub, command->plan, false, true);
  sub->add_option("-f,--format", command->format, "Output form: text (one line per rank), csv (PyTorch), json")
      ->check(CLI::IsMember({"text", "csv", "json"}))
      ->capture_default_str();
  add_output_option(*sub, command->output);
  sub->add_flag("--lower", command->lower, "Add the SEND/RECV communication actions the runtime executes");
  sub->callback([command] { run(*command); });
}

}  // namespace dualpipe::cli
