// The rules of a training run's options that need neither files nor LibTorch: what `dualpipe train` refuses before
// any rank starts (train/run_plan.h adds what needs the files), and what `dualpipe layout` checks a planned layout
// against before it prints a train command for it. One place, so the two cannot disagree.
#pragma once

#include <string>

#include "dualpipe/run/train_config.h"
#include "dualpipe/schedule/schedule.h"

namespace dualpipe::run {

// Throws InvalidArgument naming the option and the rule ("--tp 8 must divide --heads 4: ...").
void check_options(const TrainConfig& config);

// The schedule the options name: generated (its generator's rules hold, DualPipe's M >= 2R among them), or read
// from --schedule-file and validated, with its counts those of --ranks and --microbatches. Throws InvalidArgument.
Schedule schedule_of(const TrainConfig& config);

// A model as a planner describes it, beside what the trainer's model (models/gpt.h) can be.
struct ModelFeatures {
  int vocab = 256;
  int hidden = 0, ffn_hidden = 0, heads = 0, kv_heads = 0;
  bool gated_ffn = false, tied_embeddings = false;
  int experts = 0, expert_ffn_hidden = 0, shared_experts = 0, dense_layers = 0, moe_layer_freq = 1;
};
// Why the trainer's model cannot be `model` (its options cannot express it), or "".
std::string unsupported_model(const ModelFeatures& model);

}  // namespace dualpipe::run
