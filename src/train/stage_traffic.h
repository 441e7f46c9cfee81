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
// two LayerNorms and two biases, 6 x hidden, or with MoE the LayerNorms, proj's bias, the router and the local
// experts; the position embedding on the first stage, the final LayerNorm on the last). With recomputation the forward's collectives run twice.
//
// Context parallelism: each block's attention passes C - 1 K/V blocks on around the ring forward and as many
// gradients backward, each rows x tokens / C x 2 hidden / T x 4 bytes (twice the forward's with recomputation); the
// once-a-step sum of the gradients over the group is not counted.
//
// With MoE layers on a split sequence (--cp, or --sp), each layer's forward also all-gathers its tokens' expert
// choices and probability sums over the group, (ranks - 1) x (tokens x k + N) x 8 bytes (models/moe.h).
//
// Data parallelism (data_parallel_traffic.h), with Ψ the bytes of a stage's parameters reduced over G ranks (the
// D replicas; the D / E holders of the same experts for sharded experts; with DualPipe's copies joined to the
// reduction, both copies' holders) and each rank's part of a ring's traffic, as the ZeRO paper counts:
// ZeRO-0 all-reduces the gradients, 2 (G-1)/G Ψ; ZeRO-1 also broadcasts the updated tensors from their owners,
// 3 (G-1)/G Ψ (the paper's ZeRO-1 reduce-scatters instead: 2); ZeRO-2 reduces each gradient onto its owner and
// broadcasts the update, 2 (G-1)/G Ψ; ZeRO-3 gathers each stage once a step (it stays whole from its first action
// to its last) and reduces, 2 (G-1)/G Ψ (the paper's gathers twice, forward and backward: 3). A stage whose copies
// are joined all-reduces under ZeRO-2 and 3 too (replicated_step.h), so it counts as ZeRO-1 does. The stage
// copies' point-to-point sum when they are not joined is the pipeline's, not counted.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "dualpipe/parallel/data_parallel_traffic.h"
#include "dualpipe/models/gpt.h"
#include "dualpipe/train/run_plan.h"
#include "dualpipe/train/train_config.h"
#include "stage_state.h"

namespace dualpipe::train {

class StageTraffic {
 public:
  StageTraffic() = default;  // describe() is empty
  // `stages` with whole parameters (before ZeRO-3 drops them); `data_parallel`: DataParallel::traffic();
  // `copies_joined`: the stage copies are summed in the data-parallel reductions (ReplicatedStep::joins_copies).
  StageTraffic(const TrainConfig& config, const RunPlan& plan, int pipeline_rank, models::TensorGroup tp,
               models::ContextGroup cp, const std::map<int, StageState>& stages,
               std::shared_ptr<const parallel::DataParallelTraffic> data_parallel, bool copies_joined);

  void step_started();
  // After the step's stage work (the tensor- and context-parallel traffic's end).
  void step_finished();
  // After the optimizer's step and the sharing of its updates (the data-parallel traffic's end).
  void updates_finished();
  // "tensor-parallel traffic per training step, this rank: 1.23 MiB sent (ring), predicted 1.23 MiB", and the same
  // line for the context-parallel ring and the data-parallel collectives, one per kind this rank has; empty before
  // a step.
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
  std::shared_ptr<const parallel::DataParallelTraffic> data_parallel_;
  Counted tensor_, context_, data_;
  int steps_ = 0, update_steps_ = 0;
};

}  // namespace dualpipe::train
