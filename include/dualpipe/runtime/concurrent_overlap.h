// A stage whose overlapped forward-backward runs the two halves on two threads: the backward on a second thread,
// the forward on the caller's. Made for stages whose halves wait on communication of their own, such as an MoE
// stage's expert all-to-alls: while one micro-batch's exchange is under way the other computes, which is what
// DualPipe's forward-backward overlap is for (DeepSeek-V3, section 3.2.1).
//
// Two ways to share the rank:
// - TakeTurns, DeepSeek's interleave: the backward half starts (its first part is an exchange, the forward's is
//   compute); one half computes until it has started an exchange, then the turn goes to whichever half's exchange
//   ends first (the other half's, normally: it has been under way while this one computed). The chunk runs part by
//   part (attention, dispatch, experts, combine, and the backward of each), every exchange under way while the
//   other micro-batch computes, and the two never compute at once. Code that communicates calls
//   yield_overlap_turn() between starting an exchange (a c10d Work) and waiting for it (parallel/expert_all_to_all.h
//   does).
// - Concurrent (this class's default): both halves run freely at once and the operating system shares the cores
//   between them. Measured on the emulated device and on a GPU, it hid more than the turns (docs/parallelism.md,
//   "Which is the default"); `dualpipe train` now runs MoE stages as phases on one thread instead (phases.h).
//
// The results are those of the forward followed by the backward, bit for bit: the halves belong to different
// micro-batches, the forward only reads the parameters and the backward only adds to their gradients, and each
// runs its operations in its usual order. What the halves share must allow it:
// - collectives: c10d matches them by their order within a group, so forward and backward must not use the same
//   group (parallel/expert_all_to_all.h uses one group for each direction);
// - threads: LibTorch's intra-op pool is shared, so give each rank one intra-op thread, as for any rank;
// - devices: the backward thread starts with the caller's thread-local state (grad mode and the like). On a GPU
//   the halves run on two streams, ordered by events (pair_streams.h): the backward on the stream its forward ran
//   on (autograd's rule), the forward on the other of the caller's stream and the stage's side stream. The turns
//   follow the threads that run the halves: autograd runs a CPU backward on the calling thread, but a GPU backward
//   on the device's own thread, where yield_overlap_turn() finds no turns and does nothing.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include <c10/core/Stream.h>

#include "dualpipe/runtime/stage.h"

namespace dualpipe::runtime {

// When each half of one overlapped forward-backward ran, and on which thread (taking turns, the backward half starts
// when it first gets the turn).
struct OverlapHalves {
  using Time = std::chrono::steady_clock::time_point;
  std::thread::id forward_thread, backward_thread;
  Time forward_start, forward_end, backward_start, backward_end;
  // On a GPU, the streams the halves' work was queued on; none on the CPU.
  std::optional<c10::Stream> forward_stream, backward_stream;
};

enum class OverlapMode { TakeTurns, Concurrent };

// Called by a half of an overlapped pair that has started an exchange and is about to wait for it, with a test of
// whether the exchange has ended (c10d's Work::isCompleted; none: the half is ready as soon as it has yielded).
// With OverlapMode::TakeTurns, the half whose exchange ends first computes next: the other half takes the turn
// once the exchange it yielded on has ended, unless this one's ends first; returns when this half may go on.
// Elsewhere (another mode, no overlapped pair on this thread) returns at once.
void yield_overlap_turn(std::function<bool()> exchange_done = nullptr);
// Whether this thread runs a half of an overlapped pair taking turns (where yield_overlap_turn() does something).
bool taking_overlap_turns();

class ConcurrentOverlapStage : public Stage {
 public:
  // `observer`, if given, is told of every overlapped forward-backward's halves once both are done.
  explicit ConcurrentOverlapStage(std::shared_ptr<Stage> inner,
                                  std::function<void(const OverlapHalves&)> observer = nullptr,
                                  OverlapMode mode = OverlapMode::Concurrent)
      : inner_(std::move(inner)), observer_(std::move(observer)), mode_(mode) {}

  Tensors forward(const Tensors& inputs) override { return inner_->forward(inputs); }
  std::shared_ptr<torch::nn::Module> module() const override { return inner_->module(); }
  c10::Device device() const override { return inner_->device(); }
  // The backward on a second thread and the forward here, taking turns or not; an exception from either is
  // rethrown (the forward's first) once both are done.
  Tensors overlapped_forward_backward(const Tensors& inputs, const BackwardHalf& backward) override;

 private:
  std::shared_ptr<Stage> inner_;
  std::function<void(const OverlapHalves&)> observer_;
  OverlapMode mode_;
  std::optional<c10::Stream> side_stream_;  // on a GPU: the forward half's stream when the backward has the caller's
};

}  // namespace dualpipe::runtime
