// Small helpers shared by the generator files (internal).
#pragma once

#include <string>
#include <utility>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/util/error.h"

namespace dualpipe::gen {

// An empty schedule with one action list per rank.
inline Schedule empty_schedule(std::string kind, int num_ranks, int num_stages, int num_microbatches,
                               Placement placement) {
  Schedule s;
  s.kind = std::move(kind);
  s.num_ranks = num_ranks;
  s.num_stages = num_stages;
  s.num_microbatches = num_microbatches;
  s.placement = std::move(placement);
  s.actions.resize(num_ranks);
  return s;
}

// The rules every generator shares: at least one rank and one micro-batch.
inline void require_basic(std::string_view kind, const ScheduleOptions& o) {
  DUALPIPE_REQUIRE(o.num_ranks >= 1, kind, " needs at least 1 rank, got R=", o.num_ranks);
  DUALPIPE_REQUIRE(o.num_microbatches >= 1, kind, " needs at least 1 micro-batch, got M=", o.num_microbatches);
  DUALPIPE_REQUIRE(o.num_ranks <= 4096 && o.num_microbatches <= 1'000'000, kind,
                   " supports at most 4096 ranks and 1000000 micro-batches, got R=", o.num_ranks,
                   " M=", o.num_microbatches);
}

// Generators without virtual stages reject --stages-per-rank other than their own count.
inline void require_stages_per_rank(std::string_view kind, const ScheduleOptions& o, int own) {
  DUALPIPE_REQUIRE(o.stages_per_rank == 0 || o.stages_per_rank == own, kind, " places ", own,
                   " stage(s) on each rank; --stages-per-rank ", o.stages_per_rank, " does not apply");
}

// The checks and the empty schedule of a family with one stage per rank, stage r on rank r (GPipe, 1F1B).
inline Schedule empty_linear_schedule(std::string_view family, std::string kind, const ScheduleOptions& o) {
  require_basic(family, o);
  require_stages_per_rank(family, o, 1);
  return empty_schedule(std::move(kind), o.num_ranks, o.num_ranks, o.num_microbatches, Placement::linear(o.num_ranks));
}

}  // namespace dualpipe::gen
