// Point-to-point transport between the ranks of a pipeline.
//
// The runtime only needs tagged, asynchronous send/receive of dense tensors plus a barrier: every message
// of a step has its own tag (derived from direction, producer stage and micro-batch), so the order in which
// two different messages between the same pair of ranks are posted does not matter. Implementations:
// GlooCommunicator (c10d ProcessGroupGloo over TCP, across machines) and InProcessCommunicator (threads of
// one process, for tests).
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <memory>
#include <string>

#include "dualpipe/util/error.h"

namespace dualpipe::comm {

// A failed or timed-out transfer; the message names the peer rank.
class CommError : public Error {
 public:
  explicit CommError(const std::string& message, int rank = -1, std::string reason = {}, bool invalid_input = false)
      : Error(message), rank_(rank), reason_(reason.empty() ? message : std::move(reason)),
        invalid_input_(invalid_input) {}
  // The rank blamed: dead, stuck, or the peer of a failed transfer; -1 when unknown.
  int rank() const { return rank_; }
  // The cause without the "rank r: <operation>:" context, for callers that word their own context.
  const std::string& reason() const { return reason_; }
  // The blamed rank refused its input (peer_monitor.h): Python raises ValueError for it on every rank.
  bool invalid_input() const { return invalid_input_; }

 private:
  int rank_;
  std::string reason_;
  bool invalid_input_;
};

// An outstanding isend/irecv. wait() returns once the transfer completed (for a receive: the tensor passed
// to irecv holds the data) or throws CommError naming the peer after `timeout`.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait(std::chrono::milliseconds timeout) = 0;
  // Non-blocking completion poll (lets the executor free send buffers early).
  virtual bool is_completed() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Sends `tensor` (contiguous) to `dst`. The caller keeps `tensor` unchanged and alive until the Work
  // completed. Tags are >= 0 and below 2^31.
  virtual std::shared_ptr<Work> isend(const at::Tensor& tensor, int dst, int tag) = 0;
  // Receives the message (`src`, `tag`) into `tensor`, which must already have the sender's shape and dtype
  // and stay alive until the Work completed.
  virtual std::shared_ptr<Work> irecv(at::Tensor& tensor, int src, int tag) = 0;
  // All ranks of the communicator; throws CommError after the timeout.
  virtual void barrier() = 0;

  // The timeout used for waits when the caller does not give one.
  virtual std::chrono::milliseconds timeout() const = 0;

  // Whether a receive matches only the sends of its own tag (Gloo, the in-process hub), so that receives of
  // several tags may be posted in any order between them; false where every message of a pair matches by issue
  // order alone (NCCL, and the single-tag test mode that stands for it). The pipeline then posts a step's
  // receives ahead (runtime/mailbox.h).
  virtual bool matches_by_tag() const { return false; }
};

}  // namespace dualpipe::comm
