// Schedule generators: one family per source file in src/schedule/generators/, registered in one table.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "dualpipe/schedule.h"

namespace dualpipe {

struct ScheduleOptions {
  int num_ranks = 4;
  int num_microbatches = 8;
  // Stages per rank for looped schedules (interleaved 1F1B); 0 picks the generator's default.
  int stages_per_rank = 0;
};

using GeneratorFn = Schedule (*)(const ScheduleOptions&);

struct GeneratorInfo {
  std::string_view name;     // command-line name: "dualpipe", "zb-h1", ...
  std::string_view summary;  // one line for --help
  GeneratorFn make;
};

// Every generator, in the order the CLI lists them.
const std::vector<GeneratorInfo>& generators();

// Builds a schedule by name; throws InvalidArgument for an unknown name (listing the known ones) or for
// parameters the generator cannot serve (naming the rule).
Schedule make_schedule(std::string_view kind, const ScheduleOptions& options);

Schedule make_gpipe(const ScheduleOptions& options);
Schedule make_1f1b(const ScheduleOptions& options);
Schedule make_interleaved_1f1b(const ScheduleOptions& options);
Schedule make_zb_h1(const ScheduleOptions& options);
Schedule make_zb_h2(const ScheduleOptions& options);
Schedule make_zbv(const ScheduleOptions& options);
Schedule make_chimera(const ScheduleOptions& options);
Schedule make_dualpipe(const ScheduleOptions& options);
Schedule make_dualpipev(const ScheduleOptions& options);

}  // namespace dualpipe
