// The emulated device (src/models/emulated_compute.h) is one device per rank. The host work a thread does between
// two computes stands for part of its next compute, but only where no other thread had the device meanwhile: a
// rank's two threads (the two-thread overlap) must not get a second device out of one's host work.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <time.h>

#include <chrono>
#include <thread>

#include "models/emulated_compute.h"

namespace dualpipe::models {
namespace {

using Clock = std::chrono::steady_clock;

void compute_forward_for(int64_t microseconds) {
  const torch::Tensor x = torch::zeros({1});
  const torch::Tensor anchor = torch::zeros({1}, torch::requires_grad());
  emulated_compute(x, anchor, microseconds, 0, 0);
}

double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

// Host work: this thread's CPU busy for `ms`.
void host_work_for(double ms) {
  const double start = thread_cpu_ms();
  volatile uint64_t sink = 0;
  while (thread_cpu_ms() - start < ms) sink = sink + 1;
}

TEST(EmulatedCompute, TwoThreadsShareOneDeviceHostWorkIncluded) {
  const Clock::time_point start = Clock::now();
  compute_forward_for(1);  // this thread's first compute: its host work counts from here
  // The other thread's compute takes the device for 60 ms while this one's host works for 30 ms of CPU, then
  // computes for 40 ms. The device's work is 100 ms: the 30 ms of host work ran while the device was taken (on a
  // machine with a core for each thread), so it can stand for none of the 40, and the two end no sooner than
  // 100 ms after the start. Counted as before (the host work standing for 30 ms of the compute whatever the other
  // thread did), they ended at about 70 ms.
  std::thread other([] { compute_forward_for(60'000); });
  host_work_for(30);
  compute_forward_for(40'000);
  other.join();
  const double elapsed_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  // Not a speed limit: a lower bound, the sleeps' own. Less 0.1 ms: the emulator's clocks count whole microseconds.
  EXPECT_GE(elapsed_ms, 100.0 - 0.1);
}

}  // namespace
}  // namespace dualpipe::models
