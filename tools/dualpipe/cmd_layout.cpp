// `dualpipe layout`: how to cut a training job over a cluster (docs/layout.md).
#include <sys/stat.h>

#include <filesystem>
#include <optional>
#include <string>

#include "commands.h"
#include "dualpipe/layout/layout_report.h"
#include "dualpipe/sim/cost_model.h"
#include "dualpipe/sim/kineto_plan.h"
#include "dualpipe/trace/trace.h"
#include "dualpipe/util/byte_size.h"
#include "dualpipe/util/number_format.h"
#include "dualpipe/util/error.h"
#include "dualpipe/util/file_input.h"
#include "output.h"

namespace dualpipe::cli {
namespace {

struct LayoutCommand {
  std::string model, cluster, fix, format = "table", output, calibrate, max_memory;
  int global_batch = 0, seq_len = 0, top = 10, calibrate_mbs = 0, calibrate_stages = 1;
  bool include_unfit = false, families_only = false, explain = false;
};

// The costs of torch.profiler traces (a file, or a directory of one per rank), per slice of the ranks that ran
// where the traces name their schedule (`dualpipe train --kineto-trace`), else per --calibrate-stages.
layout::Calibration calibration_from_kineto(const LayoutCommand& c, layout::LayoutRequest& request) {
  const KinetoRun run = read_kineto_run(read_kineto_ranks({c.calibrate}), KinetoCostNames{});
  const int stages = run.schedule ? run.schedule->num_ranks : c.calibrate_stages;
  return layout::calibrate_from_costs(request.model, request.cluster, run.costs.costs, stages, c.calibrate_mbs,
                                      c.calibrate);
}

// --calibrate: a dualpipe train --trace, torch.profiler traces, or a --cost string (`dualpipe profile --kineto`
// writes one).
layout::Calibration calibration_of(const LayoutCommand& c, layout::LayoutRequest& request) {
  std::error_code error;
  if (std::filesystem::is_directory(c.calibrate, error)) return calibration_from_kineto(c, request);
  struct stat st;
  if (::lstat(c.calibrate.c_str(), &st) != 0) {  // a link, even a loop of them, is a file the readers name
    DUALPIPE_REQUIRE(c.calibrate.find('=') != std::string::npos, "--calibrate '", c.calibrate,
                     "' is neither a file or directory (a dualpipe train --trace, or its --kineto-trace) nor a --cost "
                     "string (F=...,B=...)");
    return layout::calibrate_from_costs(request.model, request.cluster, CostModel::parse(c.calibrate),
                                        c.calibrate_stages, c.calibrate_mbs, c.calibrate);
  }
  require_regular_file(c.calibrate, "--calibrate '" + c.calibrate + "'");  // named once, not by both readers
  Trace trace;
  try {
    trace = read_trace(c.calibrate);
  } catch (const InvalidArgument& not_ours) {
    try {
      return calibration_from_kineto(c, request);
    } catch (const InvalidArgument& not_kineto) {
      if (looks_like_profiler_trace(c.calibrate)) throw;
      throw InvalidArgument(std::string(not_ours.what()) + "; nor is it a PyTorch profiler trace with costs: " +
                            not_kineto.what());
    }
  }
  return layout::calibrate(request.model, request.cluster, trace, c.calibrate_mbs, c.calibrate);
}

void run(const LayoutCommand& c) {
  check_output(c.output, {{"--model", c.model}, {"--cluster", c.cluster}, {"--calibrate", c.calibrate}});
  layout::LayoutRequest request;
  request.model = layout::model_spec(c.model);
  if (c.seq_len > 0) request.model.seq_len = c.seq_len;
  request.cluster = layout::cluster_spec(c.cluster);
  request.global_batch = c.global_batch;
  request.fix = layout::LayoutFix::parse(c.fix);
  request.top = c.top;
  request.include_unfit = c.include_unfit;
  request.planner = !c.families_only;
  if (!c.max_memory.empty()) request.max_memory_bytes = parse_byte_size(c.max_memory, "--max-memory");
  std::optional<layout::Calibration> calibration;
  if (!c.calibrate.empty()) calibration = calibration_of(c, request);
  const layout::LayoutSearch search = layout::search_layouts(request);
  const layout::Calibration* measured = calibration ? &*calibration : nullptr;
  if (c.explain) {
    DUALPIPE_REQUIRE(!search.ranked.empty(), "--explain: no layout fits in memory (add --include-unfit to explain "
                                             "the closest)");
    const layout::LayoutResult& best = search.ranked.front();
    write_output(c.output, c.format == "json" ? layout::layout_explanation_json(request, best, measured)
                                              : layout::layout_explanation(request, best, measured));
    return;
  }
  write_output(c.output, c.format == "json" ? layout::layout_json(request, search, measured)
                                            : layout::layout_table(request, search, measured));
}

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

}  // namespace

void add_layout_command(CLI::App& app) {
  auto [sub, command] = add_command<LayoutCommand>(app, "layout", run,
      "Plan a whole training job: tp, cp, pp, dp, ep, ZeRO stage, recomputation, micro-batches and schedule, "
      "ranked by tokens/s per GPU within the GPUs' memory");
  // Printed as soon as it is parsed, so that the options a search requires are not asked for.
  sub->add_flag_callback(
         "--list-presets",
         [] {
           write_stdout("models: " + joined(layout::model_preset_names()) + "\nclusters: " +
                 joined(layout::cluster_preset_names()) + " (each with its GPU count after 'x': h100-sxmx64)\n");
           throw CLI::Success();
         },
         "List the model and cluster presets (docs/layout.md has their figures and sources), then stop")
      ->trigger_on_parse();
  sub->add_option("--model", command->model, "A model preset or a model JSON file (docs/layout.md)")->required();
  sub->add_option("--cluster", command->cluster, "A cluster preset with its GPU count (h100-sxmx64) or a JSON file")
      ->required();
  sub->add_option("--global-batch", command->global_batch, "Sequences per optimizer step")
      ->required()
      ->check(CLI::Range(1, 1 << 30));
  sub->add_option("--seq-len", command->seq_len, "Sequence length (default: the model's)")
      ->check(CLI::Range(1, 1 << 24));
  sub->add_option("--top", command->top, "Rows to show")->check(CLI::Range(1, 10000))->capture_default_str();
  sub->add_option("--fix", command->fix,
                  "Hold sizes fixed: KEY=VALUE,... with keys tp, cp, pp, vpp, dp, ep, zero, mbs, recompute, schedule "
                  "(several joined by '+'), and how the layers run: sp, dp_overlap, flash, even_stages (0 or 1)");
  sub->add_flag("--explain", command->explain,
                "Take the best layout (hold it with --fix) apart: its step by part (compute and its efficiency, "
                "recomputation, exposed and hidden communication, bubble, optimizer) and its memory by part");
  auto* calibrate = sub->add_option(
      "--calibrate", command->calibrate,
      "Fit the time model to a run of --model: a dualpipe train --trace (one replica; compute rate, update and step "
      "time), its --kineto-trace directory or another PyTorch profiler trace (compute rate, from the regions' "
      "costs), or a --cost string in microseconds (compute rate; dualpipe profile --kineto writes one)");
  sub->add_option("--calibrate-mbs", command->calibrate_mbs,
                  "Sequences per micro-batch of the --calibrate run (its --batch)")
      ->check(CLI::Range(1, 1 << 20))
      ->needs(calibrate);
  calibrate->needs("--calibrate-mbs");
  sub->add_option("--calibrate-stages", command->calibrate_stages,
                  "Equal stages the --calibrate costs were measured on (1: the whole model)")
      ->check(CLI::Range(1, 1 << 20))
      ->needs(calibrate)
      ->capture_default_str();
  sub->add_option("--max-memory", command->max_memory,
                  std::string("Memory one pipeline schedule may take to generate, e.g. 4GiB (default 1GiB); a "
                              "search may generate ") +
                      formatted("%g", layout::kSearchBytesPerLimit) +
                      " times it in all. Larger searches are refused up front. Units: " + kByteUnitsHelp);
  sub->add_flag("--families-only", command->families_only,
                "The hand-made schedule families only (default: the planner's automatic schedules too, for the best "
                "pipelines)");
  sub->add_flag("--include-unfit", command->include_unfit, "List layouts over the memory limit too (marked '!')");
  add_format_and_output(*sub, command->format, command->output);
  sub->footer("Presets: models " + joined(layout::model_preset_names()) + "; clusters " +
              joined(layout::cluster_preset_names()) +
              ", each with its GPU count after 'x'.\n"
              "Examples:\n"
              "  dualpipe layout --model llama3-70b --cluster h100-sxmx512 --global-batch 1024\n"
              "  dualpipe layout --model deepseek-v3 --cluster h800x2048 --global-batch 15360 --fix pp=16,tp=1\n"
              "  dualpipe layout --model deepseek-v3 --cluster h800x2048 --global-batch 15360 --explain "
              "--fix tp=1,cp=1,pp=16,ep=64,mbs=1,zero=1,schedule=dualpipe\n"
              "  dualpipe layout --model my_model.json --cluster my_cluster.json --global-batch 64 --format json\n"
              "  dualpipe layout --model small.json --cluster this_machine.json --global-batch 16 --calibrate run.json "
              "--calibrate-mbs 2");
}

}  // namespace dualpipe::cli
