#include "emulated_compute.h"

#include <torch/csrc/autograd/custom_function.h>
#include <torch/torch.h>

#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

namespace dualpipe::models {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The rank's one emulated device: a process runs one rank. Computes hold `device()` while they sleep.
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

int64_t wall_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}

// How long, in all, the device has been taken: by the computes' sleeps and by the host work counted as device time.
// A thread's host work counts only for what of its interval no other thread took, so that a rank's two threads (the
// two-thread overlap) share one device: one's host work does not count while the other's compute holds the device.
class DeviceClock {
 public:
  int64_t taken_us(int64_t now) {
    const std::lock_guard<std::mutex> lock(mutex_);
    return taken_us_ + (held_since_ >= 0 ? now - held_since_ : 0);
  }
  // Host work counted as device time; it ran before now, and counts from now against the other threads' intervals
  // that include now (an interval that ended before it does not see it: the host work's own times are not known).
  void take(int64_t us) {
    const std::lock_guard<std::mutex> lock(mutex_);
    taken_us_ += us;
  }
  void hold(int64_t now) {
    const std::lock_guard<std::mutex> lock(mutex_);
    held_since_ = now;
  }
  void release(int64_t now) {
    const std::lock_guard<std::mutex> lock(mutex_);
    taken_us_ += now - held_since_;
    held_since_ = -1;
  }

 private:
  std::mutex mutex_;
  int64_t taken_us_ = 0;
  int64_t held_since_ = -1;  // while a compute holds the device
};

DeviceClock& device_clock() {
  static DeviceClock clock;
  return clock;
}

// Where a thread's last compute ended: its CPU time, the wall clock and the device's clock.
struct ComputeMark {
  int64_t cpu, wall, taken;  // microseconds
  static ComputeMark now() {
    const int64_t wall = wall_us();
    return {thread_cpu_us(), wall, device_clock().taken_us(wall)};
  }
};

// The device computes for `costed_us`, less what the host's own maths took on this thread since its last compute
// while no other thread had the device: the small model's real operations stand for part of the device's time
// instead of adding to it. The thread's CPU time, so that waiting (for an exchange, a message, a core) does not
// count.
void compute_for(int64_t costed_us) {
  const auto microseconds = static_cast<int64_t>(static_cast<double>(costed_us) * slowdown().load());
  thread_local ComputeMark last = ComputeMark::now();
  const int64_t now = wall_us();
  const int64_t host_us = thread_cpu_us() - last.cpu;
  const int64_t device_free_us = (now - last.wall) - (device_clock().taken_us(now) - last.taken);
  const int64_t counted_us = std::clamp<int64_t>(std::min(host_us, device_free_us), 0, microseconds);
  device_clock().take(counted_us);
  if (microseconds > counted_us) {
    const std::lock_guard<std::mutex> busy(device());
    device_clock().hold(wall_us());
    std::this_thread::sleep_for(std::chrono::microseconds(microseconds - counted_us));
    device_clock().release(wall_us());
  }
  last = ComputeMark::now();
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
