#include "pair_streams.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>

namespace dualpipe::runtime::detail {
namespace {

// Work queued on `waiter` from now on runs after everything queued on `producer` so far.
void wait_for(const c10::Stream& waiter, const c10::Stream& producer) {
  if (waiter == producer) return;
  c10::Event event(producer.device_type());
  event.record(producer);
  event.block(waiter);
}

}  // namespace

c10::Stream current_stream(c10::Device device) {
  return c10::impl::VirtualGuardImpl(device.type()).getStream(device);
}

PairStreams::PairStreams(c10::Device device, std::optional<c10::Stream> backward, c10::Stream side)
    : caller_(current_stream(device)),
      forward_(caller_),
      backward_(backward.value_or(caller_)) {
  if (backward_ == caller_) forward_ = side;
}

void PairStreams::begin() const {
  wait_for(forward_, caller_);
  wait_for(backward_, caller_);
}

void PairStreams::end(const Tensors& forward_outputs) const {
  wait_for(caller_, forward_);
  wait_for(caller_, backward_);
  if (forward_ == caller_) return;
  for (const auto& t : forward_outputs)
    if (t.defined() && t.device() == forward_.device()) t.record_stream(caller_);
}

}  // namespace dualpipe::runtime::detail
