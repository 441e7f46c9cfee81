// The generic input/weight split against the unsplit backward (issue 8, item 4: I + W within 10% of B).
//
//   build/bench_weight_split [--reps N] [--width W] [--tokens T] [--rows B]
//
// One transformer stage of stock LibTorch layers (tests/runtime/support/transformer_stage.h: LayerNorm, biased
// Linear, causal attention, GELU MLP), one intra-op thread. Each repetition runs a fresh forward, then either the
// unsplit backward (B) or the input half (I) followed by the weight half (W), alternating so both see the same
// machine; forwards are not timed. Prints the medians and the ratio (I + W) / B measured side by side, and each
// part's page faults: memory the allocator had given back to the system and takes again, touched page by page.
#include <sys/resource.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "runtime/backward_split.h"
#include "runtime/support/transformer_stage.h"

namespace {

using Clock = std::chrono::steady_clock;
using dualpipe::runtime::Tensors;

double ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

// The process's minor page faults so far.
double page_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_minflt);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 21;
  dualpipe::testing::TransformerShape shape;
  shape.width = 256;
  shape.heads = 8;
  shape.max_tokens = 128;
  int64_t rows = 4, tokens = 128;
  for (int i = 1; i + 1 < argc; i += 2) {
    const long v = std::atol(argv[i + 1]);
    if (!std::strcmp(argv[i], "--reps")) reps = static_cast<int>(v);
    else if (!std::strcmp(argv[i], "--width")) shape.width = v;
    else if (!std::strcmp(argv[i], "--tokens")) tokens = shape.max_tokens = v;
    else if (!std::strcmp(argv[i], "--rows")) rows = v;
    else {
      std::fprintf(stderr, "usage: bench_weight_split [--reps N] [--width W] [--tokens T] [--rows B]\n");
      return 2;
    }
  }
  at::set_num_threads(1);
  dualpipe::testing::TransformerStage stage(shape, false, 1);
  const Tensors ids_and_mask = dualpipe::testing::transformer_inputs(shape, rows, tokens, 2);
  const torch::Tensor hidden = torch::randn({rows, tokens, shape.width});
  const torch::Tensor grad = torch::randn({rows, tokens, shape.width});
  auto forward = [&] {
    torch::Tensor x = hidden.clone().requires_grad_(true);
    return std::make_pair(x, stage->forward({x, ids_and_mask[1]})[0]);
  };

  std::vector<double> full, input, weight, full_faults, input_faults, weight_faults;
  for (int r = 0; r < reps + 2; ++r) {  // the first two are warm-up
    stage->zero_grad();
    auto [x1, y1] = forward();
    const double f0 = page_faults();
    const auto t0 = Clock::now();
    dualpipe::runtime::detail::backward_full({y1}, {grad}, {x1});
    const auto t1 = Clock::now();
    const double f1 = page_faults();

    stage->zero_grad();
    auto [x2, y2] = forward();
    dualpipe::runtime::detail::DeferredWeightGrad w;
    const double f2 = page_faults();
    const auto t2 = Clock::now();
    dualpipe::runtime::detail::backward_input({y2}, {grad}, {x2}, w);
    const auto t3 = Clock::now();
    const double f3 = page_faults();
    w.run();
    const auto t4 = Clock::now();
    const double f4 = page_faults();
    if (r < 2) continue;
    full.push_back(ms(t0, t1));
    input.push_back(ms(t2, t3));
    weight.push_back(ms(t3, t4));
    full_faults.push_back(f1 - f0);
    input_faults.push_back(f3 - f2);
    weight_faults.push_back(f4 - f3);
  }
  std::vector<double> split(full.size());
  for (size_t i = 0; i < split.size(); ++i) split[i] = input[i] + weight[i];
  const double b = median(full), iw = median(split);
  std::printf("generic I/W split vs unsplit backward: one transformer stage, width %lld, %lld tokens, %lld rows, "
              "%d repetitions, 1 intra-op thread\n\n",
              static_cast<long long>(shape.width), static_cast<long long>(tokens), static_cast<long long>(rows),
              reps);
  std::printf("%-22s %10s %13s\n", "part", "median ms", "page faults");
  std::printf("%-22s %10.3f %13.0f\n", "B (unsplit)", b, median(full_faults));
  std::printf("%-22s %10.3f %13.0f\n", "I (input grads)", median(input), median(input_faults));
  std::printf("%-22s %10.3f %13.0f\n", "W (weight grads)", median(weight), median(weight_faults));
  std::printf("%-22s %10.3f\n", "I + W (per repetition)", iw);
  std::printf("\n(I + W) / B = %.3f  (target <= 1.10: %s)\n", iw / b, iw / b <= 1.10 ? "met" : "MISSED");
  return 0;
}
