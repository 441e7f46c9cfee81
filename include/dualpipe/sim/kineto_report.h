// `dualpipe profile --kineto`'s output: the trace's regions with their compute, communication and overlap, and
// the --cost string they make (table or JSON, docs/profile.md).
#pragma once

#include <string>

#include "dualpipe/sim/kineto_costs.h"

namespace dualpipe {

// `costs` may be null when the trace has no forward and backward regions to read costs from.
std::string kineto_table(const std::string& source, const KinetoTrace& trace, const KinetoSummary& summary,
                         const KinetoCosts* costs);
std::string kineto_json(const std::string& source, const KinetoTrace& trace, const KinetoSummary& summary,
                        const KinetoCosts* costs);

}  // namespace dualpipe
