// torch.distributed.pipelining's compute-only CSV form (`_dump_csv` / `_load_csv`): one row per rank,
// one cell per action ("0F1", "2I0", "(0F7;7B3)OVERLAP_F_B"), an empty cell meaning an idle step.
#pragma once

#include <string>
#include <string_view>

#include "dualpipe/schedule/schedule.h"
#include "dualpipe/schedule/schedule_limits.h"

namespace dualpipe {

// One row per rank, the compute actions in order (communication actions are left out, as PyTorch does
// for the compute-only form), with the data-parallel ones where the schedule has them ("0UNSHARD", "0REDUCE_GRAD",
// as PyTorch writes them). Rows are padded with empty cells to equal length.
std::string format_pytorch_csv(const Schedule& schedule);

// PyTorch's pipelining maps every stage to one rank. Throws InvalidArgument naming the schedule, the first stage
// held by two ranks and the rule when the schedule places a stage on two (the two-direction placement of DualPipe
// and Chimera), which PyTorch's actions and runtime cannot express. The CSV above can still hold such a schedule:
// dualpipe's own readers take it back.
void require_one_rank_per_stage(const Schedule& schedule);

// Reads the form above; empty cells are skipped. Placement and counts are inferred as for parse_text, with the
// same limits. A blank line is an error (a row is a rank; an idle rank would still have its empty cells), except
// at the end of the file.
Schedule parse_pytorch_csv(std::string_view csv, const ScheduleReadLimits& limits = {});

}  // namespace dualpipe
