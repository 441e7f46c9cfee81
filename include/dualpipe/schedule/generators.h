// Schedule generators: one family per source file in src/schedule/generators/, registered in one table.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "dualpipe/schedule/schedule.h"
#include "dualpipe/schedule/schedule_limits.h"

namespace dualpipe {

struct ScheduleOptions {
  int num_ranks = 4;
  int num_microbatches = 8;
  // Stages per rank for looped schedules (interleaved 1F1B); 0 picks the generator's default.
  int stages_per_rank = 0;
  // make_schedule refuses a request whose estimated memory (estimate_schedule_bytes) is above this.
  std::int64_t max_memory_bytes = kDefaultMaxScheduleMemory;
};

using GeneratorFn = Schedule (*)(const ScheduleOptions&);

struct GeneratorInfo {
  std::string_view name;     // command-line name: "dualpipe", "zb-h1", ...
  std::string_view summary;  // one line for --help
  GeneratorFn make;
  // Stages per rank: 1, 2 (the V shapes), or 0 when the caller picks it (ScheduleOptions::stages_per_rank,
  // default 2; the planner tries 2, 3 and 4).
  int stages_per_rank;
  // How its schedules place the stages, as placement_kind() (sim/planner.h) names it: "linear", "v", "two"
  // (two directions, every stage on two ranks) or "looped".
  std::string_view placement;
};

// Every generator, in the order the CLI lists them.
const std::vector<GeneratorInfo>& generators();

// The generator of a kind name, in any case ("DualPipe" is "dualpipe"); nullptr for an unknown name.
const GeneratorInfo* find_generator(std::string_view kind);

// Builds a schedule by name, in any case. Throws InvalidArgument for an unknown name (suggesting the closest name
// when it looks like a slip, and listing the known ones), for parameters the generator cannot serve (naming the
// rule), or when estimate_schedule_bytes is above options.max_memory_bytes (naming both), before anything is
// allocated.
Schedule make_schedule(std::string_view kind, const ScheduleOptions& options);

// An upper estimate of the memory that generating, validating and lowering a schedule of this kind and size
// takes: bytes per (stage, micro-batch) pair, measured (docs/limits.md), times stages x micro-batches.
double estimate_schedule_bytes(std::string_view kind, const ScheduleOptions& options);

Schedule make_gpipe(const ScheduleOptions& options);
Schedule make_1f1b(const ScheduleOptions& options);
Schedule make_interleaved_1f1b(const ScheduleOptions& options);
Schedule make_combined_1f1b(const ScheduleOptions& options);
Schedule make_zb_h1(const ScheduleOptions& options);
Schedule make_zb_h2(const ScheduleOptions& options);
Schedule make_zbv(const ScheduleOptions& options);
Schedule make_chimera(const ScheduleOptions& options);
Schedule make_dualpipe(const ScheduleOptions& options);
Schedule make_dualpipev(const ScheduleOptions& options);

}  // namespace dualpipe
