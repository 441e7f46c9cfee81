#include "dualpipe/runtime/concurrent_overlap.h"

#include <ATen/ThreadLocalState.h>

#include <exception>
#include <thread>

namespace dualpipe::runtime {

Tensors ConcurrentOverlapStage::overlapped_forward_backward(const Tensors& inputs, const BackwardHalf& backward) {
  std::exception_ptr backward_error;
  const at::ThreadLocalState caller_state;
  std::thread backward_thread([&] {
    at::ThreadLocalStateGuard same_state(caller_state);
    try {
      backward.run();
    } catch (...) {
      backward_error = std::current_exception();
    }
  });
  Tensors outputs;
  std::exception_ptr forward_error;
  try {
    outputs = inner_->forward(inputs);
  } catch (...) {
    forward_error = std::current_exception();
  }
  backward_thread.join();
  if (forward_error) std::rethrow_exception(forward_error);
  if (backward_error) std::rethrow_exception(backward_error);
  return outputs;
}

}  // namespace dualpipe::runtime
