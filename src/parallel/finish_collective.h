// Waits for a c10d collective, and on Gloo for its worker thread to let go of it (internal to dualpipe_parallel).
//
// ProcessGroupGloo runs a collective on a worker thread, which drops its reference to the work, and with it to the
// tensors the work holds, just after marking it done. Were the worker's the last reference, those tensors would be
// freed on that thread, where the activation meter (runtime/memory_meter.h), which hears the frees of the rank's
// own thread only, never sees them: its figure would grow with every collective. Waiting until the caller's
// reference is the only one makes the frees happen here. (NCCL's watchdog keeps its works longer; NCCL is left as it
// is.)
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <chrono>
#include <thread>

namespace dualpipe::parallel::detail {

inline void finish_collective(const c10d::ProcessGroup& group, c10::intrusive_ptr<c10d::Work> work) {
  work->wait();
  if (group.getBackendName() != "gloo") return;
  // The worker lets go microseconds after the work is done; the bound only keeps a surprise from hanging the rank.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  while (work.use_count() > 1 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
}

}  // namespace dualpipe::parallel::detail
