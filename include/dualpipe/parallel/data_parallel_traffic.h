// The bytes a rank sends in the data-parallel collectives of training: the gradients' reduction
// (DataParallel's all-reduce, ZeRO-2/3's reduce onto each owner) and the sharing of parameters (ZeRO-1/2's broadcast
// of the updated tensors from their owners, ZeRO-3's gather before a stage computes), counted where they are
// started, as a ring sends them, so the run can print them beside the volumes of the ZeRO paper (stage_traffic.h).
// The few scalars of the losses and the gradient norm are not counted.
#pragma once

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace dualpipe::parallel {

struct DataParallelTraffic {
  std::atomic<int64_t> sent{0};

  // A ring all-reduce of `bytes` over `ranks` sends 2 (G-1)/G of them from each rank.
  void all_reduce(size_t bytes, int ranks) { sent += share(2.0 * double(bytes), ranks); }
  // A reduce onto one member, or a broadcast from one, counts as each rank's part of the reduce-scatter or the
  // all-gather that the group's reduces or broadcasts make up: (G-1)/G of `bytes`.
  void one_member(size_t bytes, int ranks) { sent += share(double(bytes), ranks); }

 private:
  static int64_t share(double bytes, int ranks) { return std::llround(bytes * (ranks - 1) / ranks); }
};

}  // namespace dualpipe::parallel
