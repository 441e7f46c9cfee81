// Bytes allocated and not yet freed on this thread, as c10's allocators report them (internal).
//
// The CPU allocator and CUDA's caching allocator report every allocation and free to the thread's memory
// reporting hook (the one the profiler uses for memory events). While a MemoryMeter lives, it is that hook, so
// ranks that are threads of one process each count their own. Where a profiler already holds the hook, the
// meter steps aside and reads 0.
#pragma once

#include <cstdint>
#include <memory>

namespace dualpipe::runtime::detail {

class MemoryMeter {
 public:
  MemoryMeter();
  ~MemoryMeter();
  MemoryMeter(const MemoryMeter&) = delete;
  MemoryMeter& operator=(const MemoryMeter&) = delete;

  // Allocated minus freed bytes since the meter started.
  int64_t live_bytes() const;
  bool active() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dualpipe::runtime::detail
