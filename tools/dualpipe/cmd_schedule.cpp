// `dualpipe schedule`: print a schedule in the text, PyTorch CSV or JSON form.
#include <iostream>

#include "commands.h"
#include "dualpipe/schedule/lower.h"
#include "dualpipe/schedule/pytorch_csv.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/sim/result_json.h"
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
    write_output(c.output, schedule_json(s).dump(2) + "\n");
  }
}

}  // namespace

void add_schedule_command(CLI::App& app) {
  auto [sub, command] = add_command<ScheduleCommand>(app, "schedule", run,
      "Print the per-rank action order of a schedule");
  add_plan_options(*sub, command->plan, false, true);
  add_format_and_output(*sub, command->format, command->output, {"text", "csv", "json"},
                        "Output form: text (one line per rank), csv (PyTorch), json");
  sub->add_flag("--lower", command->lower, "Add the SEND/RECV communication actions the runtime executes");
  sub->footer("Example: dualpipe schedule --kind dualpipe --ranks 4 --microbatches 8");
}

}  // namespace dualpipe::cli
