#include "memory_meter.h"

#include "dualpipe/runtime/unmetered_memory.h"

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <atomic>
#include <optional>

namespace dualpipe::runtime::detail {
namespace {

// The thread-local slot the profiler's memory events use.
using DebugSlot = c10::DebugInfoKind;

class Counter : public c10::MemoryReportingInfoBase {
 public:
  void reportMemoryUsage(void*, int64_t alloc_size, size_t, size_t, c10::Device) override { live += alloc_size; }
  bool memoryProfilingEnabled() const override { return true; }
  // Atomic: LibTorch hands the thread's debug info on to the threads it starts work on (intra-op pools).
  std::atomic<int64_t> live{0};
};

// Hears nothing: what UnmeteredMemory puts in the meter's place.
class Deaf : public c10::MemoryReportingInfoBase {
 public:
  void reportMemoryUsage(void*, int64_t, size_t, size_t, c10::Device) override {}
  bool memoryProfilingEnabled() const override { return false; }
};

}  // namespace

struct MemoryMeter::Impl {
  std::shared_ptr<Counter> counter;
  std::optional<c10::DebugInfoGuard> guard;
};

MemoryMeter::MemoryMeter() : impl_(new Impl) {
  if (c10::ThreadLocalDebugInfo::get(DebugSlot::PROFILER_STATE) != nullptr) return;  // a profiler's
  impl_->counter = std::make_shared<Counter>();
  impl_->guard.emplace(DebugSlot::PROFILER_STATE, impl_->counter);
}

MemoryMeter::~MemoryMeter() = default;

int64_t MemoryMeter::live_bytes() const { return impl_->counter ? impl_->counter->live.load() : 0; }
bool MemoryMeter::active() const { return impl_->counter != nullptr; }

}  // namespace dualpipe::runtime::detail

namespace dualpipe::runtime {

struct UnmeteredMemory::Impl {
  std::optional<c10::DebugInfoGuard> guard;
};

// Only a meter's slot is covered: a profiler's memory events stay as they are.
UnmeteredMemory::UnmeteredMemory() : impl_(new Impl) {
  if (dynamic_cast<detail::Counter*>(c10::ThreadLocalDebugInfo::get(detail::DebugSlot::PROFILER_STATE)))
    impl_->guard.emplace(detail::DebugSlot::PROFILER_STATE, std::make_shared<detail::Deaf>());
}

UnmeteredMemory::~UnmeteredMemory() = default;

}  // namespace dualpipe::runtime
