// The tensor-parallel traffic of a training step on one rank (internal): counted on its group
// (TensorParallelGroup::ring_bytes_sent) and predicted from the model's shape, so the run prints the two side by
// side.
//
// The prediction, in the bytes a ring sends from each rank (2 (T-1)/T of an all-reduce's tensor, (T-1)/T of an
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
// the last).
#pragma once

#include <string>

#include "dualpipe/models/gpt.h"
#include "dualpipe/train/run_plan.h"
#include "dualpipe/train/train_config.h"

namespace dualpipe::train {

class TensorParallelTraffic {
 public:
  TensorParallelTraffic() = default;  // no tensor parallelism: describe() is empty
  TensorParallelTraffic(const TrainConfig& config, const RunPlan& plan, int pipeline_rank, models::TensorGroup tp);

  void step_started();
  void step_finished();
  // "tensor-parallel traffic per training step, this rank: 1.23 MiB sent (ring), predicted 1.23 MiB"; empty
  // without tensor parallelism or before a step.
  std::string describe() const;

 private:
  models::TensorGroup tp_;
  double predicted_bytes_ = 0;
  int64_t at_step_start_ = 0, counted_bytes_ = 0;
  int steps_ = 0;
};

}  // namespace dualpipe::train
