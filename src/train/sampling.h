// The text sample at the end of a run: --sample-tokens bytes after --prompt, generated through the pipeline.
#pragma once

#include <chrono>
#include <string>

#include "dualpipe/comm/communicator.h"
#include "dualpipe/models/gpt.h"
#include "dualpipe/runtime/executor.h"
#include "dualpipe/train/train_config.h"

namespace dualpipe::train {

// One pipeline forward per byte on `forward_only` (an executor without declared shapes: the context grows). Every
// micro-batch carries the same context; the rank where micro-batch 0 leaves the pipeline draws the next byte
// (greedy at --temperature 0, else from the softmax, seeded by --seed) and the others learn it by a sum over
// `communicator`. Every rank returns the same text: the prompt and the bytes drawn. Empty when sample_tokens = 0.
// With a tensor-parallel group `tp`, its ranks gather their slices of the last position's logits and draw the same
// byte (the same generator on each). With a context-parallel group `cp`, the context is padded to 2C chunks and
// split as in training; the rank holding the last position shares its logits with the group, and all draw alike.
std::string sample_text(const TrainConfig& config, runtime::Executor& forward_only, comm::Communicator& communicator,
                        c10::Device device, std::chrono::milliseconds timeout, const models::TensorGroup& tp = nullptr,
                        const models::ContextGroup& cp = nullptr);

}  // namespace dualpipe::train
