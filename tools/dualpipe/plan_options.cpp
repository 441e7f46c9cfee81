#include "plan_options.h"

#include <fstream>
#include <sstream>

#include "dualpipe/error.h"
#include "dualpipe/generators.h"
#include "dualpipe/pytorch_csv.h"
#include "dualpipe/text_format.h"
#include "dualpipe/validate.h"

namespace dualpipe::cli {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string kind_list() {
  std::string names;
  for (const GeneratorInfo& g : generators()) names += (names.empty() ? "" : ", ") + std::string(g.name);
  return names;
}

// Reads a whole file; throws InvalidArgument naming the path when it cannot.
std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DUALPIPE_REQUIRE(in, "cannot open '", path, "' for reading");
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

}  // namespace

void add_plan_options(CLI::App& command, PlanOptions& o, bool with_cost, bool with_from) {
  command.add_option("-k,--kind", o.kind, "Schedule kind: " + kind_list())->capture_default_str();
  command.add_option("-r,--ranks", o.ranks, "Pipeline ranks (devices), R")->capture_default_str();
  command.add_option("-m,--microbatches", o.microbatches, "Micro-batches per step, M")->capture_default_str();
  command.add_option("-v,--stages-per-rank", o.stages_per_rank,
                     "Stages per rank for interleaved-1f1b (0: the schedule's default)");
  if (with_cost) {
    command.add_option("-c,--cost", o.cost,
                       "Costs KEY=VALUE,...: F forward [1], B full backward [2], W weight part of B [1], "
                       "FB overlapped F&B pair [F+B], comm cross-rank latency [0], scale=1:1:2 per-stage "
                       "multipliers (one per stage), act_bytes bytes of one stage activation [none]; memory "
                       "model: w_mem share of a stage activation I keeps for W [1], recompute=0|1 "
                       "activation recomputation [0], input_mem share that is the stage input [0.05]");
  }
  if (with_from) {
    command.add_option("--from", o.from_file,
                       "Read the schedule from FILE instead: the text form ('rank 0: 0F0 ...') or, for a .csv "
                       "file, PyTorch's compute-only CSV");
  }
}

Schedule build_schedule(const PlanOptions& o) {
  if (o.from_file.empty()) return build_schedule(o, o.kind);
  const std::string contents = read_file(o.from_file);
  Schedule s;
  try {
    s = ends_with(o.from_file, ".csv") ? parse_pytorch_csv(contents) : parse_text(contents);
  } catch (const Error& e) {
    throw InvalidArgument(detail::concat(o.from_file, ": ", e.what()));
  }
  validate(s);
  return s;
}

Schedule build_schedule(const PlanOptions& o, const std::string& kind) {
  ScheduleOptions options;
  options.num_ranks = o.ranks;
  options.num_microbatches = o.microbatches;
  options.stages_per_rank = o.stages_per_rank;
  Schedule s = make_schedule(kind, options);
  validate(s);
  return s;
}

CostModel build_cost_model(const PlanOptions& o) { return CostModel::parse(o.cost); }

CostModel costs_for_comparison(const CostModel& per_rank_slice, const Schedule& schedule) {
  return costs_per_stage(per_rank_slice, schedule.num_ranks, schedule.num_stages);
}

}  // namespace dualpipe::cli
