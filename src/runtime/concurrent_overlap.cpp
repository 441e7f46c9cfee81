#include "dualpipe/runtime/concurrent_overlap.h"

#include <ATen/Context.h>
#include <ATen/ThreadLocalState.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "pair_streams.h"

namespace dualpipe::runtime {
namespace {

// The turn of an overlapped pair's two halves (OverlapMode::TakeTurns): which half may compute now.
class Turns {
 public:
  enum Half { kForward = 0, kBackward = 1 };

  void wait_for(Half half) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return turn_ == half; });
  }
  // `half`, holding the turn, has started an exchange (`exchange_done` tells when it has ended). The half whose
  // exchange ends first computes next: the other one, as soon as its own exchange (the one it yielded on) has
  // ended, or this one if its exchange ends first. Returns when `half` has the turn again.
  void yield(Half half, std::function<bool()> exchange_done) {
    std::unique_lock<std::mutex> lock(mutex_);
    const Half peer = other(half);
    if (done_[peer]) return;
    ready_[half] = exchange_done ? std::move(exchange_done) : always_ready;
    while (!ready_[peer]()) {
      if (ready_[half]()) {  // ours ended first: keep the turn
        ready_[half] = always_ready;
        return;
      }
      // Neither has ended, and exchanges do not notify: look again shortly.
      changed_.wait_for(lock, std::chrono::microseconds(100));
    }
    turn_ = peer;
    changed_.notify_all();
    changed_.wait(lock, [&] { return turn_ == half; });
    ready_[half] = always_ready;
  }
  // `half` is done (or failed): the other keeps the turn to its end.
  void finish(Half half) {
    const std::lock_guard<std::mutex> lock(mutex_);
    done_[half] = true;
    turn_ = other(half);
    changed_.notify_all();
  }

 private:
  static Half other(Half half) { return half == kForward ? kBackward : kForward; }
  static bool always_ready() { return true; }
  std::mutex mutex_;
  std::condition_variable changed_;
  // The backward starts. A stage's backward begins with an exchange (the gradient of its last layer's combine)
  // and its forward with compute (attention before the dispatch), so the forward's first part covers the
  // backward's first exchange. Started the other way, both halves' first exchanges ran at once, sharing the link
  // with nothing computing beside them (docs/benchmarks.md, "Emulated device").
  Half turn_ = kBackward;
  bool done_[2] = {false, false};
  // Whether each half could compute if it had the turn: its exchange has ended (or it has none).
  std::function<bool()> ready_[2] = {always_ready, always_ready};
};

// The turns of the overlapped pair this thread runs a half of (null: none, or not taking turns).
thread_local Turns* current_turns = nullptr;
thread_local Turns::Half current_half = Turns::kForward;

// Makes this thread a half of `turns` for its lifetime, and ends the half (handing the turn on) when it ends.
class HalfScope {
 public:
  HalfScope(Turns* turns, Turns::Half half)
      : turns_(turns), half_(half), previous_(current_turns), previous_half_(current_half) {
    current_turns = turns;
    current_half = half;
  }
  ~HalfScope() {
    if (turns_) turns_->finish(half_);
    current_turns = previous_;
    current_half = previous_half_;
  }

 private:
  Turns* turns_;
  Turns::Half half_;
  Turns* previous_;
  Turns::Half previous_half_;
};

}  // namespace

bool taking_overlap_turns() { return current_turns != nullptr; }

void yield_overlap_turn(std::function<bool()> exchange_done) {
  if (current_turns) current_turns->yield(current_half, std::move(exchange_done));
}

Tensors ConcurrentOverlapStage::overlapped_forward_backward(const Tensors& inputs, const BackwardHalf& backward) {
  using Clock = std::chrono::steady_clock;
  OverlapHalves halves;
  Turns turns;
  Turns* taking_turns = mode_ == OverlapMode::TakeTurns ? &turns : nullptr;
  std::exception_ptr backward_error;
  const at::ThreadLocalState caller_state;
  std::optional<detail::PairStreams> streams;
  if (const c10::Device device = inner_->device(); !device.is_cpu()) {
    if (!side_stream_) {
      side_stream_ = c10::impl::VirtualGuardImpl(device.type()).getStreamFromGlobalPool(device);
      // Each micro-batch's backward runs on the stream its forward ran on, so a parameter's gradient accumulator is
      // fed from both streams by design; autograd orders that with an event and would warn about it on every rank.
      at::globalContext().setWarnOnAccumulateGradStreamMismatch(false);
    }
    streams.emplace(device, backward.stream, *side_stream_);
    streams->begin();
    halves.forward_stream = streams->forward();
    halves.backward_stream = streams->backward();
  }
  std::thread backward_thread([&] {
    at::ThreadLocalStateGuard same_state(caller_state);
    c10::OptionalStreamGuard on_its_stream(halves.backward_stream);
    HalfScope half(taking_turns, Turns::kBackward);
    if (taking_turns) turns.wait_for(Turns::kBackward);
    halves.backward_thread = std::this_thread::get_id();
    halves.backward_start = Clock::now();
    try {
      backward.body();
      if (backward.weight) {
        // The input gradients are done, and with them the backward's exchanges: the forward may go on first if its
        // exchange has ended, so that the parameter gradients cover the forward's exchanges still to come.
        yield_overlap_turn();
        backward.weight();
      }
    } catch (...) {
      backward_error = std::current_exception();
    }
    halves.backward_end = Clock::now();
  });
  Tensors outputs;
  std::exception_ptr forward_error;
  {
    HalfScope half(taking_turns, Turns::kForward);
    if (taking_turns) turns.wait_for(Turns::kForward);
    halves.forward_thread = std::this_thread::get_id();
    halves.forward_start = Clock::now();
    try {
      c10::OptionalStreamGuard on_its_stream(halves.forward_stream);
      outputs = inner_->forward(inputs);
    } catch (...) {
      forward_error = std::current_exception();
    }
    halves.forward_end = Clock::now();
  }
  backward_thread.join();
  if (streams) streams->end(outputs);
  if (observer_ && !forward_error && !backward_error) observer_(halves);
  if (forward_error) std::rethrow_exception(forward_error);
  if (backward_error) std::rethrow_exception(backward_error);
  return outputs;
}

}  // namespace dualpipe::runtime
