#include "emulated_compute.h"

#include <torch/csrc/autograd/custom_function.h>
#include <torch/torch.h>

#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
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

// The time this thread has run or been ready to run, waiting for a core: what its work took on a machine of
// fewer cores than ranks. The kernel's per-thread accounting (/proc/thread-self/schedstat: run time and run-queue
// wait in nanoseconds); the CPU time alone where it cannot be read.
int64_t thread_busy_us() {
  long long running_ns = 0, waiting_ns = 0;
  if (FILE* f = std::fopen("/proc/thread-self/schedstat", "r")) {
    const bool read = std::fscanf(f, "%lld %lld", &running_ns, &waiting_ns) == 2;
    std::fclose(f);
    if (read) return (running_ns + waiting_ns) / 1000;
  }
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000 + t.tv_nsec / 1000;
}

// The device computes for `microseconds`, less what the host's own work took on this thread since its last
// compute, as a GPU computes while its host prepares the next kernels: the small model's real operations stand for
// part of the device's time instead of adding to it. The host's work is its run time and its waits for a core
// (eight ranks on two cores wait often; a GPU's host has cores of its own), not its blocking waits for an exchange
// or a message. A sleep's overrun (the timer's slack, the wait for a core on waking) is made up by the next ones:
// without either, at a2a = F/4 the backwards took 11% longer than set (docs/benchmarks.md).
void compute_for(int64_t costed_us) {
  const auto microseconds = static_cast<int64_t>(static_cast<double>(costed_us) * slowdown().load());
  thread_local int64_t last_compute_busy_us = thread_busy_us();
  thread_local int64_t overrun_us = 0;  // by how much the device's sleeps ended late, not yet made up
  const int64_t host_us = thread_busy_us() - last_compute_busy_us;
  const int64_t left_us = microseconds - host_us;  // the device's share
  if (left_us > overrun_us) {
    const std::lock_guard<std::mutex> busy(device());
    const auto start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::microseconds(left_us - overrun_us));
    const auto slept = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start);
    overrun_us = slept.count() - (left_us - overrun_us);
  } else {
    overrun_us -= std::max<int64_t>(0, left_us);
  }
  last_compute_busy_us = thread_busy_us();
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
