// Weight initialisation shared by the model's layers (internal): every weight is drawn from a generator seeded by
// (model seed, stream), where the stream names the part of the model, never from a global generator.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>

namespace dualpipe::models::init {

// Distinct, well-mixed generator seeds for each part of the model (splitmix64's finaliser).
inline at::Generator generator(uint64_t seed, uint64_t stream) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (stream + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return at::make_generator<at::CPUGeneratorImpl>(z ^ (z >> 31));
}

// GPT-2's initialisation: weights N(0, 0.02), biases 0, LayerNorm 1 and 0 (its defaults); the projections that
// end a residual branch get 0.02 / sqrt(2 * layers), so the residual stream's variance does not grow with depth.
constexpr double kInitStd = 0.02;

inline void init_linear(torch::nn::Linear& layer, double std, at::Generator& gen) {
  layer->weight.normal_(0, std, gen);
  if (layer->bias.defined()) layer->bias.zero_();
}

}  // namespace dualpipe::models::init
