// `dualpipe profile --kineto`'s output: the trace's regions with their compute, communication and overlap, and
// the --cost string they make (table or JSON, docs/profile.md).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "dualpipe/sim/kineto_costs.h"
#include "dualpipe/trace/kineto_ranks.h"

namespace dualpipe {

// `costs` may be null when the trace has no forward and backward regions to read costs from.
std::string kineto_table(const std::string& source, const KinetoTrace& trace, const KinetoSummary& summary,
                         const KinetoCosts* costs);
std::string kineto_json(const std::string& source, const KinetoTrace& trace, const KinetoSummary& summary,
                        const KinetoCosts* costs);

// The costs, the events that made each, and what was assumed: lines of the table, and the JSON's costs_text,
// cost_sources (cost, value in microseconds, measure, regions, occurrences) and warnings (all null or empty
// without costs).
std::string kineto_costs_text(const KinetoCosts& costs);
nlohmann::ordered_json kineto_costs_json(const KinetoCosts* costs);

// Several ranks' traces: a row per rank, and the slowest named; the JSON has each rank's summary as above. `costs`
// (of every rank's regions read together) may be null.
std::string kineto_ranks_table(const KinetoRanks& ranks, const KinetoCosts* costs);
std::string kineto_ranks_json(const KinetoRanks& ranks, const KinetoCosts* costs);

}  // namespace dualpipe
