// `dualpipe profile --kineto TRACE.json`: what a PyTorch profiler trace spent computing and communicating, region
// by region, and the --cost string its regions make (docs/profile.md).
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "dualpipe/sim/kineto_report.h"
#include "dualpipe/util/printable.h"
#include "dualpipe/util/error.h"
#include "output.h"

namespace dualpipe::cli {
namespace {

struct ProfileCommand {
  std::vector<std::string> kineto;
  std::string format = "table", output;
  KinetoCostNames names;
  KinetoReadOptions read;
};

// Several ranks' traces side by side (several files, or a directory of them).
void run_ranks(const ProfileCommand& c) {
  const KinetoRanks ranks = read_kineto_ranks(c.kineto, c.read);
  write_output(c.output, c.format == "json" ? kineto_ranks_json(ranks) : kineto_ranks_table(ranks));
}

void run(const ProfileCommand& c) {
  std::vector<NamedPath> inputs;
  for (const std::string& path : c.kineto) inputs.push_back({"--kineto", path});
  check_output(c.output, inputs);
  std::error_code error;
  if (c.kineto.size() > 1 || std::filesystem::is_directory(c.kineto[0], error)) return run_ranks(c);
  const std::string& path = c.kineto[0];
  const KinetoTrace trace = read_kineto_trace(path, c.read);
  const KinetoSummary summary = summarize_kineto(trace);
  // Costs need the forward and backward regions; a trace without them still gets its table, and says so.
  std::optional<KinetoCosts> costs;
  std::string missing;
  try {
    costs = costs_from_kineto(summary, c.names);
  } catch (const InvalidArgument& e) {
    missing = e.what();
  }
  write_output(c.output, c.format == "json" ? kineto_json(path, trace, summary, costs ? &*costs : nullptr)
                                            : kineto_table(path, trace, summary, costs ? &*costs : nullptr));
  // The message lists region names from the trace: escaped and bounded like an error.
  if (!missing.empty()) std::fprintf(stderr, "dualpipe profile: no costs: %s\n", printable_message(missing).c_str());
}

}  // namespace

void add_profile_command(CLI::App& app) {
  auto command = std::make_shared<ProfileCommand>();
  CLI::App* sub = app.add_subcommand(
      "profile", "Read a PyTorch profiler trace: compute, communication and their overlap per record_function region, "
                 "and the --cost string of its forward, backward and weight regions");
  sub->footer(
      "Examples:\n"
      "  dualpipe profile --kineto trace.json\n"
      "  dualpipe profile --kineto trace.json --forward fwd --backward bwd --weight '' --format json\n"
      "  dualpipe profile --kineto trace.json --comm-kernel 'my_a2a|custom_allgather'\n"
      "  dualpipe profile --kineto traces/            (one trace per rank)");
  sub->add_option("--kineto", command->kineto,
                  "A trace from torch.profiler's export_chrome_trace; several (or a directory of *.json): one per rank, "
                  "side by side with their clocks aligned and the slowest rank named")
      ->required();
  sub->add_option("--comm-kernel", command->read.communication_patterns,
                  "A regular expression (ECMAScript, any case) for kernel and operator names that are communication, "
                  "besides NCCL's, DeepEP's, gloo's, c10d's and the collectives' names; repeatable")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("--forward", command->names.forward, "The region read as F")->capture_default_str();
  sub->add_option("--backward", command->names.backward,
                  "The region read as B (its input-gradient part when --weight's region exists)")
      ->capture_default_str();
  sub->add_option("--weight", command->names.weight, "The region read as W ('' for none: W = B/2)")
      ->capture_default_str();
  sub->add_option("--overlapped", command->names.overlapped, "The region read as FB, an overlapped pair")
      ->capture_default_str();
  sub->add_option("--comm", command->names.comm, "The region read as comm, one pipeline message")
      ->capture_default_str();
  sub->add_option("-f,--format", command->format, "Output form: table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  add_output_option(*sub, command->output);
  sub->callback([command] { run(*command); });
}

}  // namespace dualpipe::cli
