// The `dualpipe train` command that runs a planned layout on this machine's processes, where the trainer can.
#pragma once

#include <optional>
#include <string>

#include "dualpipe/layout/cluster_spec.h"
#include "dualpipe/layout/layout.h"
#include "dualpipe/layout/model_spec.h"

namespace dualpipe::layout {

// The command line, or why there is none: the row filled into the trainer's own configuration (run::TrainConfig),
// checked by the trainer's own rules (run/train_rules.h) and written by its table of options, for the local
// processes of one machine. `why_not` is the first rule the row breaks, in the trainer's words.
struct TrainCommand {
  std::optional<std::string> command;
  std::string why_not;  // set when command is empty
};
// A row of a planned schedule gets its `dualpipe plan` command first, and trains from the file it writes.
TrainCommand train_command(const ModelSpec& model, const ClusterSpec& cluster, const LayoutResult& row);

}  // namespace dualpipe::layout
