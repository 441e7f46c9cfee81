#include "plan_options.h"

#include "dualpipe/schedule/data_parallel_lowering.h"
#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/schedule_file.h"
#include "dualpipe/schedule/schedule_limits.h"
#include "dualpipe/schedule/validate.h"
#include "dualpipe/sim/plan_file.h"
#include "dualpipe/util/byte_size.h"
#include "dualpipe/util/error.h"
#include "dualpipe/util/file_input.h"

namespace dualpipe::cli {
namespace {

std::string kind_list() {
  std::string names;
  for (const GeneratorInfo& g : generators()) names += (names.empty() ? "" : ", ") + std::string(g.name);
  return names;
}

// The header of a plan file given to --from (dualpipe plan --format text), if it has one.
std::optional<PlanFileHeader> plan_header(const PlanOptions& o) {
  if (o.from_file.empty()) return std::nullopt;
  return read_plan_header(read_file_within(o.from_file, ScheduleReadLimits{}.max_bytes, "schedule files"),
                          o.from_file);
}

}  // namespace

void add_plan_options(CLI::App& command, PlanOptions& o, bool with_cost, bool with_from) {
  command.add_option("-k,--kind", o.kind, "Schedule kind: " + kind_list())->capture_default_str();
  command.add_option("-r,--ranks", o.ranks, "Pipeline ranks (devices), R")->capture_default_str();
  command.add_option("-m,--microbatches", o.microbatches, "Micro-batches per step, M")->capture_default_str();
  command.add_option("-v,--stages-per-rank", o.stages_per_rank,
                     "Stages per rank for interleaved-1f1b and combined-1f1b (0: the schedule's default)");
  command.add_option("--max-memory", o.max_memory,
                     std::string("Refuse schedules whose estimated memory is above SIZE [1GiB]; units: ") +
                         kByteUnitsHelp + "; see docs/limits.md");
  command.add_option("--dp", o.data_parallel,
                     "Data-parallel replicas of the pipeline: more than 1 adds each stage's gradient reduction "
                     "(REDUCE_GRAD) to the schedule, timed by the cost 'reduce'")
      ->capture_default_str();
  command.add_option("--zero", o.zero,
                     "ZeRO stage over the replicas (0-3): 3 adds the gathering and dropping of each stage's "
                     "parameters (UNSHARD, RESHARD; cost 'unshard'); from 2 on, the reductions wait for the step's end")
      ->capture_default_str();
  if (with_cost) {
    command.add_option("-c,--cost", o.cost,
                       "Costs KEY=VALUE,...: F forward [1], B full backward [2], W weight part of B [1], "
                       "I input-gradient half of a split backward [B-W], FB overlapped F&B pair [F+B], "
                       "comm cross-rank latency [0], gap a rank's host time between "
                       "its compute actions [0], a2a expert all-to-all time of a stage's forward, added to F, B and I and hidden by a pair, which is timed phase by phase (a lone B's "
                       "too) [0], "
                       "a2a_latency of each exchange (a2a / 2 layers long), the part that the exchanges under way at "
                       "once in a pair do not share [0], layers MoE "
                       "layers of a slice, over whose dispatches and combines a2a spreads [1], pair=threads a pair's "
                       "halves on two threads at once (train --fb-overlap-mode threads), pair=off one after the other "
                       "(train --no-fb-overlap) [phases], unshard and "
                       "reduce a stage's "
                       "data-parallel gather and gradient reduction (with --dp, --zero) [0], scale=1:1:2 per-stage "
                       "multipliers (one per stage), act_bytes bytes of one stage activation [none]; memory "
                       "model: w_mem share of a stage activation I keeps for W [1], recompute=0|1 "
                       "activation recomputation [0], input_mem share that is the stage input [0.05]");
    command.add_option("--rank-speed", o.rank_speed,
                       "A speed per pipeline rank, like 1,1,0.67,1: a rank's compute actions take 1/speed times their "
                       "cost there (a throttled GPU, a noisy neighbour)");
  }
  if (with_from) {
    command.add_option("--from", o.from_file,
                       "Read the schedule from FILE instead: the text form ('rank 0: 0F0 ...') or, for a .csv "
                       "file, PyTorch's compute-only CSV. A plan file (plan --format text) brings its costs, "
                       "which --cost replaces");
  }
}

Schedule build_schedule(const PlanOptions& o) {
  if (o.from_file.empty()) return build_schedule(o, o.kind);
  // Bounded like every schedule reader (docs/limits.md): a device such as /dev/zero is cut off at the limit.
  Schedule s = read_schedule_file(o.from_file);
  validate(s);
  if (const auto header = plan_header(o); header && !header->name.empty()) s.kind = header->name;
  return with_data_parallel_actions(o, s);
}

Schedule with_data_parallel_actions(const PlanOptions& o, const Schedule& schedule) {
  if (o.data_parallel == 1 && o.zero == 0) return schedule;
  const std::string found = first_data_parallel_action(schedule);
  DUALPIPE_REQUIRE(found.empty(), "'", o.from_file, "' already holds its data-parallel actions (", found,
                   "): leave --dp and --zero out to run them as written, or give the schedule without them");
  Schedule s = add_data_parallel_actions(schedule, o.data_parallel, zero_stage(o.zero, "--zero"));
  validate(s);
  return s;
}

Schedule build_schedule(const PlanOptions& o, const std::string& kind) {
  ScheduleOptions options;
  options.num_ranks = o.ranks;
  options.num_microbatches = o.microbatches;
  options.stages_per_rank = o.stages_per_rank;
  if (!o.max_memory.empty()) options.max_memory_bytes = parse_byte_size(o.max_memory, "--max-memory");
  Schedule s = make_schedule(kind, options);
  validate(s);
  return with_data_parallel_actions(o, s);
}

CostModel build_cost_model(const PlanOptions& o) {
  const std::optional<PlanFileHeader> header = o.cost.empty() ? plan_header(o) : std::nullopt;
  CostModel costs = header ? header->costs : CostModel::parse(o.cost);
  if (!o.rank_speed.empty()) costs.rank_speed = parse_rank_speed(o.rank_speed);
  return costs;
}

CostModel costs_for_comparison(const CostModel& per_rank_slice, const Schedule& schedule) {
  return costs_per_stage(per_rank_slice, schedule.num_ranks, schedule.num_stages);
}

void add_step_option(CLI::App& command, int& step, const std::string& purpose) {
  command
      .add_option("--step", step,
                  "The step to " + purpose + ", as the trace numbers it: dualpipe train numbers steps from 1, as it "
                  "prints them (default: the last step recorded)")
      ->check(CLI::Range(0, 1000000000));
}

}  // namespace dualpipe::cli
