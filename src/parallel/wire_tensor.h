// What a c10d collective of dualpipe_parallel sends (internal to dualpipe_parallel): contiguous tensors, staged
// through host memory for a device tensor on Gloo, whose collectives do not all take device tensors.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/torch.h>

namespace dualpipe::parallel::detail {

// What goes on the wire for `x`: its values, contiguous, on the host for a device tensor on Gloo; a copy of its own
// when `writable` (an in-place collective must not write into `x`).
inline torch::Tensor on_the_wire(const torch::Tensor& x, const c10d::ProcessGroup& group, bool writable = false) {
  if (!x.is_cpu() && group.getBackendName() == "gloo") return x.detach().to(torch::kCPU).contiguous();
  return writable ? x.detach().clone(at::MemoryFormat::Contiguous) : x.detach().contiguous();
}

}  // namespace dualpipe::parallel::detail
