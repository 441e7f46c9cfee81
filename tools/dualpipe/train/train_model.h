// The model and data of `dualpipe train`: a student made of residual MLP blocks regresses the outputs of a fixed
// random teacher network on generated inputs. Everything is built from the seed with private generators, so
// every rank (and the single-process reference) gets the same weights and the same batches without talking.
//
// The student has `layers` blocks whatever the schedule, cut into the schedule's S stages (layers / S blocks
// each), so `--schedule K` trains the same model with another pipeline.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "dualpipe/runtime/split_linear.h"

namespace dualpipe::cli {

struct ModelSpec {
  int64_t hidden = 32;
  int layers = 8;  // residual blocks in the whole student
  uint64_t seed = 0;
};

// x + W2 gelu(W1 x): split-aware layers (W1: h -> 4h, W2: 4h -> h), so I and W actions really split the work.
class ResidualBlockImpl : public torch::nn::Module {
 public:
  explicit ResidualBlockImpl(int64_t hidden);
  torch::Tensor forward(const torch::Tensor& x);

  runtime::SplitLinear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(ResidualBlock);

// Blocks [first, first + count) of the student.
class StudentStageImpl : public torch::nn::Module {
 public:
  StudentStageImpl(const ModelSpec& spec, int first_block, int num_blocks);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  std::vector<ResidualBlock> blocks_;
};
TORCH_MODULE(StudentStage);

// Stage `stage` of `num_stages`, its weights drawn from the seed block by block (independent of the split).
// Throws InvalidArgument when the layers do not split evenly into the stages.
StudentStage make_student_stage(const ModelSpec& spec, int stage, int num_stages);

// One step's data: `num_microbatches` micro-batches of `rows` rows, concatenated along dim 0.
struct Batch {
  torch::Tensor inputs;   // [M * rows, hidden], standard normal
  torch::Tensor targets;  // the teacher's outputs
};
Batch make_batch(const ModelSpec& spec, int step, int num_microbatches, int64_t rows);

// The training loss of one micro-batch: mean squared error divided by M, so the sum over micro-batches (what
// the pipeline's gradients are) is the batch mean.
torch::Tensor microbatch_loss(const torch::Tensor& output, const torch::Tensor& target, int num_microbatches);

}  // namespace dualpipe::cli
