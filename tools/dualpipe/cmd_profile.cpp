// `dualpipe profile --kineto TRACE.json`: what a PyTorch profiler trace spent computing and communicating, region
// by region, and the --cost string its regions make (docs/profile.md).
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "dualpipe/sim/kineto_plan.h"
#include "dualpipe/sim/kineto_report.h"
#include "dualpipe/util/printable.h"
#include "dualpipe/util/error.h"
#include "kineto_options.h"
#include "output.h"

namespace dualpipe::cli {
namespace {

struct ProfileCommand {
  std::vector<std::string> kineto;
  std::string format = "table", output;
  KinetoCostNames names;
  KinetoReadOptions read;
};

// Costs need the forward and backward regions; a trace without them still gets its table, and says so.
std::optional<KinetoCosts> costs_or_reason(const std::function<KinetoCosts()>& read, std::string& reason) {
  try {
    return read();
  } catch (const InvalidArgument& e) {
    reason = e.what();
    return std::nullopt;
  }
}

// The message lists region names from the trace: escaped and bounded like an error.
void say_missing(const std::string& reason) {
  if (!reason.empty()) std::fprintf(stderr, "dualpipe profile: no costs: %s\n", printable_message(reason).c_str());
}

// Several ranks' traces side by side (several files, or a directory of them).
void run_ranks(const ProfileCommand& c) {
  const KinetoRanks ranks = read_kineto_ranks(c.kineto, c.read);
  std::string missing;
  const std::optional<KinetoCosts> costs = costs_or_reason([&] { return kineto_run_costs(ranks, c.names); }, missing);
  const KinetoCosts* read = costs ? &*costs : nullptr;
  write_output(c.output, c.format == "json" ? kineto_ranks_json(ranks, read) : kineto_ranks_table(ranks, read));
  say_missing(missing);
}

void run(const ProfileCommand& c) {
  std::vector<NamedPath> inputs;
  for (const std::string& path : c.kineto) inputs.push_back({"--kineto", path});
  check_output(c.output, inputs);
  c.names.check();
  std::error_code error;
  if (c.kineto.size() > 1 || std::filesystem::is_directory(c.kineto[0], error)) return run_ranks(c);
  const std::string& path = c.kineto[0];
  const KinetoTrace trace = read_kineto_trace(path, c.read);
  const KinetoSummary summary = summarize_kineto(trace);
  std::string missing;
  const std::optional<KinetoCosts> costs =
      costs_or_reason([&] { return costs_from_kineto(summary, c.names); }, missing);
  write_output(c.output, c.format == "json" ? kineto_json(path, trace, summary, costs ? &*costs : nullptr)
                                            : kineto_table(path, trace, summary, costs ? &*costs : nullptr));
  say_missing(missing);
}

}  // namespace

void add_profile_command(CLI::App& app) {
  auto [sub, command] = add_command<ProfileCommand>(app, "profile", run,
      "Read a PyTorch profiler trace: compute, communication and their overlap per record_function region, "
      "and the --cost string of its forward, backward and weight regions");
  sub->add_option("--kineto", command->kineto,
                  "A trace from torch.profiler's export_chrome_trace; several (or a directory of *.json): one per rank, "
                  "side by side with their clocks aligned and the slowest rank named")
      ->required();
  add_kineto_options(*sub, command->read, command->names);
  add_format_and_output(*sub, command->format, command->output);
  sub->footer(R"(Examples:
  dualpipe profile --kineto trace.json
  dualpipe profile --kineto trace.json --forward '^fwd$' --backward '^bwd$' --weight '' --format json
  dualpipe profile --kineto trace.json --comm-kernel 'my_a2a|custom_allgather'
  dualpipe profile --kineto traces/            (one trace per rank))");
}

}  // namespace dualpipe::cli
