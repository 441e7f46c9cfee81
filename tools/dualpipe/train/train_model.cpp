#include "train_model.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "dualpipe/error.h"

namespace dualpipe::cli {
namespace {

// Distinct, well-mixed generator seeds for each use of the one user seed (splitmix64's finaliser).
uint64_t mix(uint64_t seed, uint64_t stream) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (stream + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

at::Generator generator(uint64_t seed, uint64_t stream) {
  return at::make_generator<at::CPUGeneratorImpl>(mix(seed, stream));
}

constexpr uint64_t kTeacherStream = 1;
constexpr uint64_t kBlockStream = 1000;       // + block index
constexpr uint64_t kBatchStream = 1u << 20;   // + step

// The teacher: y = x + tanh(x A) B, fixed by the seed. Smooth and within reach of the student's blocks, so the
// loss falls steadily from the first steps.
struct Teacher {
  torch::Tensor a, b;
};

Teacher make_teacher(const ModelSpec& spec) {
  auto gen = generator(spec.seed, kTeacherStream);
  const double scale = 1.0 / std::sqrt(static_cast<double>(spec.hidden));
  Teacher t;
  t.a = at::randn({spec.hidden, 2 * spec.hidden}, gen) * (2.0 * scale);
  t.b = at::randn({2 * spec.hidden, spec.hidden}, gen) * scale;
  return t;
}

}  // namespace

ResidualBlockImpl::ResidualBlockImpl(int64_t hidden) {
  fc1 = register_module("fc1", runtime::SplitLinear(hidden, 4 * hidden));
  fc2 = register_module("fc2", runtime::SplitLinear(4 * hidden, hidden));
}

torch::Tensor ResidualBlockImpl::forward(const torch::Tensor& x) {
  return x + fc2->forward(torch::gelu(fc1->forward(x)));
}

StudentStageImpl::StudentStageImpl(const ModelSpec& spec, int first_block, int num_blocks) {
  torch::NoGradGuard no_grad;
  for (int i = 0; i < num_blocks; ++i) {
    const int block = first_block + i;
    ResidualBlock b(spec.hidden);
    // Linear's default bounds, drawn from the block's own stream: the same weights whichever stage holds it.
    auto gen = generator(spec.seed, kBlockStream + block);
    b->fc1->weight.uniform_(-1.0 / std::sqrt(static_cast<double>(spec.hidden)),
                            1.0 / std::sqrt(static_cast<double>(spec.hidden)), gen);
    b->fc2->weight.uniform_(-1.0 / std::sqrt(4.0 * spec.hidden), 1.0 / std::sqrt(4.0 * spec.hidden), gen);
    blocks_.push_back(register_module("block" + std::to_string(block), b));
  }
}

torch::Tensor StudentStageImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = x;
  for (auto& b : blocks_) y = b->forward(y);
  return y;
}

StudentStage make_student_stage(const ModelSpec& spec, int stage, int num_stages) {
  DUALPIPE_REQUIRE(num_stages >= 1 && spec.layers % num_stages == 0, "--layers ", spec.layers,
                   " does not split into the schedule's ", num_stages,
                   " stages: use a multiple of the stage count (for example ", 2 * num_stages, ")");
  const int per_stage = spec.layers / num_stages;
  return StudentStage(spec, stage * per_stage, per_stage);
}

Batch make_batch(const ModelSpec& spec, int step, int num_microbatches, int64_t rows) {
  torch::NoGradGuard no_grad;
  auto gen = generator(spec.seed, kBatchStream + static_cast<uint64_t>(step));
  Batch batch;
  batch.inputs = at::randn({num_microbatches * rows, spec.hidden}, gen);
  const Teacher t = make_teacher(spec);
  batch.targets = batch.inputs + torch::tanh(batch.inputs.matmul(t.a)).matmul(t.b);
  return batch;
}

torch::Tensor microbatch_loss(const torch::Tensor& output, const torch::Tensor& target, int num_microbatches) {
  return torch::mse_loss(output, target) / static_cast<double>(num_microbatches);
}

}  // namespace dualpipe::cli
