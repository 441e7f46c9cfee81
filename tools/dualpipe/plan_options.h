// Options shared by the planning commands (schedule, simulate, draw): which schedule, how big, what it costs.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "dualpipe/schedule/schedule.h"
#include "dualpipe/sim/cost_model.h"

namespace dualpipe::cli {

struct PlanOptions {
  std::string kind = "dualpipe";
  int ranks = 4;
  int microbatches = 8;
  int stages_per_rank = 0;
  std::string cost;       // "F=1,B=2,W=1,FB=3,comm=0"
  std::string from_file;  // a schedule in text or PyTorch CSV form instead of a generator
  std::string max_memory;  // --max-memory: raises the generators' limit (kDefaultMaxScheduleMemory); empty: default
  int data_parallel = 1;   // --dp: replicas of the pipeline, whose collectives the schedule then holds
  int zero = 0;            // --zero: the ZeRO stage over them
  std::string rank_speed;  // --rank-speed: "1,1,0.67,1" (CostModel::rank_speed)
};

// Adds --kind, --ranks, --microbatches, --stages-per-rank, --max-memory, --dp, --zero; with_cost adds --cost and
// --rank-speed, with_from adds --from.
void add_plan_options(CLI::App& command, PlanOptions& options, bool with_cost, bool with_from);

// The schedule the options name (generated, or read from --from), validated. Throws dualpipe::Error.
Schedule build_schedule(const PlanOptions& options);
// The same for another kind with the same sizes (for --kind all and --compare).
Schedule build_schedule(const PlanOptions& options, const std::string& kind);
// `schedule` with the data-parallel actions of --dp and --zero (schedule/data_parallel_lowering.h), validated.
Schedule with_data_parallel_actions(const PlanOptions& options, const Schedule& schedule);

// --cost; without it, the costs in the header of a --from plan file, else the defaults.
CostModel build_cost_model(const PlanOptions& options);

// Comparisons hold the model fixed: the given costs are those of one rank's 1/R slice of the model, and a
// schedule that cuts the model into S > R stages (DualPipeV, ZBV, interleaved) gets them scaled by R/S.
CostModel costs_for_comparison(const CostModel& per_rank_slice, const Schedule& schedule);

// --step for the commands that read a trace (compare, draw): one step as the trace numbers it, the last by
// default. `int` stays -1 when not given.
void add_step_option(CLI::App& command, int& step, const std::string& purpose);

}  // namespace dualpipe::cli
