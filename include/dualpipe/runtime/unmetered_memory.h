// Memory that is not an activation, kept out of the executor's activation meter (StepStats::peak_activation_bytes).
#pragma once

#include <memory>

namespace dualpipe::runtime {

// While one lives, allocations and frees on this thread are not counted by a running step's meter: for memory a
// step hook holds that is not an activation, such as the parameters ZeRO-3 gathers before a stage computes. The
// allocation and the free must both happen under one, or the meter counts half of it.
class UnmeteredMemory {
 public:
  UnmeteredMemory();
  ~UnmeteredMemory();
  UnmeteredMemory(const UnmeteredMemory&) = delete;
  UnmeteredMemory& operator=(const UnmeteredMemory&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dualpipe::runtime
