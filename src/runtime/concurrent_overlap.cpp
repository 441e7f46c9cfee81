#include "dualpipe/runtime/concurrent_overlap.h"

#include <ATen/ThreadLocalState.h>

#include <exception>
#include <thread>

namespace dualpipe::runtime {

Tensors ConcurrentOverlapStage::overlapped_forward_backward(const Tensors& inputs, const BackwardHalf& backward) {
  using Clock = std::chrono::steady_clock;
  OverlapHalves halves;
  std::exception_ptr backward_error;
  const at::ThreadLocalState caller_state;
  std::thread backward_thread([&] {
    at::ThreadLocalStateGuard same_state(caller_state);
    halves.backward_thread = std::this_thread::get_id();
    halves.backward_start = Clock::now();
    try {
      backward.run();
    } catch (...) {
      backward_error = std::current_exception();
    }
    halves.backward_end = Clock::now();
  });
  Tensors outputs;
  std::exception_ptr forward_error;
  halves.forward_thread = std::this_thread::get_id();
  halves.forward_start = Clock::now();
  try {
    outputs = inner_->forward(inputs);
  } catch (...) {
    forward_error = std::current_exception();
  }
  halves.forward_end = Clock::now();
  backward_thread.join();
  if (observer_ && !forward_error && !backward_error) observer_(halves);
  if (forward_error) std::rethrow_exception(forward_error);
  if (backward_error) std::rethrow_exception(backward_error);
  return outputs;
}

}  // namespace dualpipe::runtime
