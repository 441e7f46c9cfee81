#include "emulated_compute.h"

#include <torch/csrc/autograd/custom_function.h>
#include <torch/torch.h>

#include <time.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

namespace dualpipe::models {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The rank's one emulated device: a process runs one rank.
std::mutex& device() {
  static std::mutex the_device;
  return the_device;
}

std::atomic<double>& slowdown() {
  static std::atomic<double> factor{1.0};
  return factor;
}

int64_t thread_cpu_us() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000 + t.tv_nsec / 1000;
}

// The device computes for `microseconds`, less what the host's own maths took on this thread since its last
// compute: the small model's real operations stand for part of the device's time instead of adding to it. The
// thread's CPU time, so that waiting (for an exchange, a message, a core) does not count.
void compute_for(int64_t costed_us) {
  const auto microseconds = static_cast<int64_t>(static_cast<double>(costed_us) * slowdown().load());
  thread_local int64_t last_compute_cpu_us = thread_cpu_us();
  const int64_t host_us = thread_cpu_us() - last_compute_cpu_us;
  if (microseconds > host_us) {
    const std::lock_guard<std::mutex> busy(device());
    std::this_thread::sleep_for(std::chrono::microseconds(microseconds - host_us));
  }
  last_compute_cpu_us = thread_cpu_us();
}

struct EmulatedCompute : torch::autograd::Function<EmulatedCompute> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& anchor,
                               int64_t forward_us, int64_t input_grad_us, int64_t weight_grad_us) {
    ctx->saved_data["i"] = input_grad_us;
    ctx->saved_data["w"] = weight_grad_us;
    ctx->save_for_backward({anchor});
    compute_for(forward_us);
    return x.clone();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    torch::Tensor grad_input, grad_anchor;
    if (ctx->needs_input_grad(0)) {
      compute_for(ctx->saved_data["i"].toInt());
      grad_input = grads[0];
    }
    if (ctx->needs_input_grad(1)) {
      compute_for(ctx->saved_data["w"].toInt());
      grad_anchor = torch::zeros_like(ctx->get_saved_variables()[0]);
    }
    return {grad_input, grad_anchor, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

void set_emulated_slowdown(double factor) { slowdown().store(factor); }

torch::Tensor emulated_compute(const torch::Tensor& x, const torch::Tensor& anchor, int64_t forward_us,
                               int64_t input_grad_us, int64_t weight_grad_us) {
  if (forward_us <= 0 && input_grad_us <= 0 && weight_grad_us <= 0) return x;
  return EmulatedCompute::apply(x, anchor, forward_us, input_grad_us, weight_grad_us);
}

PaddedExchange start_padded_all_to_all(const torch::Tensor& x, const parallel::ExpertCommunication& group,
                                       const std::string& what, int64_t bytes_off_rank) {
  PaddedExchange padded;
  padded.size = group.size();
  padded.sent = x;
  if (padded.size > 1 && bytes_off_rank > 0) {
    const int64_t rows = x.size(0) / padded.size, hidden = x.size(1);
    const int64_t row_bytes = hidden * static_cast<int64_t>(x.element_size());
    const int64_t chunk_bytes = (bytes_off_rank + padded.size - 2) / (padded.size - 1);
    const int64_t padding = std::max<int64_t>(0, (chunk_bytes - rows * row_bytes + row_bytes - 1) / row_bytes);
    if (padding > 0) {
      const torch::Tensor chunks = x.view({padded.size, rows, hidden});
      const torch::Tensor zeros = torch::zeros({padded.size, padding, hidden}, x.options());
      padded.sent = torch::cat({chunks, zeros}, 1).view({-1, hidden});
      padded.rows = rows;
    }
  }
  padded.exchange = parallel::start_expert_all_to_all(padded.sent, group, what);
  return padded;
}

torch::Tensor PaddedExchange::result() {
  exchange.wait();
  if (rows < 0) return exchange.output;
  const int64_t hidden = exchange.output.size(1);
  return exchange.output.view({size, -1, hidden}).narrow(1, 0, rows).reshape({-1, hidden});
}

}  // namespace dualpipe::models
