// The streams of one overlapped forward-backward pair on a GPU (ConcurrentOverlapStage), and the events that order
// them (internal).
//
// Autograd runs a backward on the stream its forward ran on, whatever stream the caller of backward() has. So the
// backward half runs there, and the forward half takes another stream: the caller's, or the stage's side stream
// when the backward already has the caller's. Each pair thus alternates: a micro-batch whose forward was a pair's
// forward half on the side stream has its backward there, beside the next forward on the caller's stream.
//
// Ordering: both halves start after everything queued on the caller's stream so far (received inputs and
// gradients), and the caller's stream goes on only after both. Memory: the caching allocator reuses a block on the
// stream that allocated it; the tensors a half takes from outside stay referenced by the executor's slots until
// after the pair, when the caller's stream has waited for both halves, so only the forward outputs made on the side
// stream need record_stream: the caller's stream reads them (sends, the next stage) after the pair.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <optional>

#include "dualpipe/runtime/stage.h"

namespace dualpipe::runtime::detail {

class PairStreams {
 public:
  // `backward`: the stream autograd runs the backward half on (BackwardHalf::stream; none: the caller's).
  // `side`: the stage's second stream.
  PairStreams(c10::Device device, std::optional<c10::Stream> backward, c10::Stream side);

  c10::Stream forward() const { return forward_; }
  c10::Stream backward() const { return backward_; }

  // Before the halves start: both streams wait for the caller's.
  void begin() const;
  // After both halves: the caller's stream waits for both, and keeps the outputs' memory until it has read them.
  void end(const Tensors& forward_outputs) const;

 private:
  c10::Stream caller_, forward_, backward_;
};

// The stream work on `device` is queued on from this thread now.
c10::Stream current_stream(c10::Device device);

}  // namespace dualpipe::runtime::detail
