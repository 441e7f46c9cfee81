// The traffic inside the stages of a training step on one rank (internal): the tensor-parallel collectives and the
// context-parallel ring, each counted on its group (ring_bytes_sent) and predicted from the model's shape, so the
// run prints the two side by side.
//
// Tensor parallelism, in the bytes a ring sends from each rank (2 (T-1)/T of an all-reduce's tensor, (T-1)/T of an
// all-gather's result or a reduce-scatter's input), with N = rows x tokens x hidden x 4 bytes, for every
// micro-batch of every stage this rank runs:
//   - each block: four all-reduces of N (forward: attention's and the MLP's g; backward: their f), 8 (T-1)/T N; with
//     sequence parallelism four all-gathers and four reduce-scatters of N, the same bytes; half that with an MoE
//     layer, which is not split;
//   - the first stage's embedding: 2 (T-1)/T N (g, or a reduce-scatter and its backward's all-gather);
//   - the last stage's head: 2 (T-1)/T N (its f), and the cross entropy's two all-reduces of 1 and 2 values per
//     token;
// and with sequence parallelism, once a step, the all-reduce of the gradients of every whole parameter (per block
// two LayerNorms and two biases, 6 x hidden; the position embedding on the first stage, the final LayerNorm on
// the last). With recomputation the forward's collectives run twice.
//
// Context parallelism: each block's attention passes C - 1 K/V blocks on around the ring forward and as many
// gradients backward, each rows x tokens / C x 2 hidden / T x 4 bytes (twice the forward's with recomputation); the
// once-a-step sum of the gradients over the group is not counted.
#pragma once

#include <atomic>
#include <string>

#include "dualpipe/models/gpt.h"
#include "dualpipe/train/run_plan.h"
#include "dualpipe/train/train_config.h"

namespace dualpipe::train {

class StageTraffic {
 public:
  StageTraffic() = default;  // describe() is empty
  StageTraffic(const TrainConfig& config, const RunPlan& plan, int pipeline_rank, models::TensorGroup tp,
               models::ContextGroup cp);

  void step_started();
  void step_finished();
  // "tensor-parallel traffic per training step, this rank: 1.23 MiB sent (ring), predicted 1.23 MiB", and the same
  // line for the context-parallel ring, one per group this rank has; empty before a step.
  std::string describe() const;

 private:
  // One group's bytes: predicted per step, and counted over the steps so far.
  struct Counted {
    const std::atomic<int64_t>* sent = nullptr;  // the group's counter; null: no such group
    double predicted = 0;
    int64_t at_step_start = 0, counted = 0;
  };
  models::TensorGroup tp_;  // keeps the counters alive
  models::ContextGroup cp_;
  Counted tensor_, context_;
  int steps_ = 0;
};

}  // namespace dualpipe::train
