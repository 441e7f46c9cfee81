// The `dualpipe train` command that runs a planned layout on this machine's processes, where the trainer can.
#pragma once

#include <optional>
#include <string>

#include "dualpipe/layout/cluster_spec.h"
#include "dualpipe/layout/layout.h"
#include "dualpipe/layout/model_spec.h"

namespace dualpipe::layout {

// The command line, or why there is none: the trainer's model is a byte-level GPT (vocabulary 256, a 4x GELU
// MLP or MoE of such experts, untied embeddings) run as local processes of one machine, with pipeline, data,
// expert and (for dense models, with sequence parallelism) tensor parallelism, ZeRO-1 and full recomputation.
struct TrainCommand {
  std::optional<std::string> command;
  std::string why_not;  // set when command is empty
};
// A row of a planned schedule gets its `dualpipe plan` command first, and trains from the file it writes.
TrainCommand train_command(const ModelSpec& model, const ClusterSpec& cluster, const LayoutResult& row);

}  // namespace dualpipe::layout
