// The header `dualpipe plan --format text` writes above the schedule it chose: the plan's name and the costs it
// was simulated with, per stage of that schedule. `simulate --from` and `draw --from` read it back, so a plan file
// reproduces the plan's figures without repeating --cost.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "dualpipe/sim/cost_model.h"
#include "dualpipe/sim/planner.h"

namespace dualpipe {

struct PlanFileHeader {
  std::string name;  // "auto V"; empty when the header names none
  CostModel costs;   // per stage of the schedule below the header
};

// "# dualpipe plan: <name>, costs <costs>\n".
std::string format_plan_header(const PlanFileHeader& header);

// The whole plan file: the header, the layer cut when the plan has one ("# layers per stage: 2,2,1,1"), the
// schedule in its text form.
std::string format_plan_file(const PlanCandidate& best);

// The header of a schedule file's text, or nullopt when it has none (any other schedule file). A header line
// whose costs cannot be read, or whose name is longer than 200 characters or holds a control character, throws
// InvalidArgument naming `path`.
std::optional<PlanFileHeader> read_plan_header(std::string_view text, const std::string& path);

}  // namespace dualpipe
