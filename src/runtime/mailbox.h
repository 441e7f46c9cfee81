// The executor's messages of one step (internal). Every message is identified by (direction, producer stage,
// micro-batch), mapped to a tag, so messages between the same two ranks may be posted and matched in any
// order. Receives are posted when the step starts and waited on only when their tensor is needed; sends are
// asynchronous and their buffers are kept until complete.
#pragma once

#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "dualpipe/comm/communicator.h"
#include "dualpipe/runtime/executor.h"

namespace dualpipe::runtime::detail {

enum class Direction : int { Forward = 0, Backward = 1 };

class Mailbox {
 public:
  // `boundaries` as in ExecutorOptions (empty: shapes travel with every message).
  Mailbox(comm::Communicator& communicator, std::chrono::milliseconds timeout,
          const std::vector<TensorSpec>& boundaries, int num_stages, int num_microbatches);

  // Posts the receive of (direction, producer stage, micro-batch) from communicator rank `src`.
  void post_recv(Direction direction, int producer, int microbatch, int src);
  // Waits for a posted receive and returns its tensor.
  torch::Tensor take(Direction direction, int producer, int microbatch);
  // Sends asynchronously to communicator rank `dst`.
  void send(Direction direction, int producer, int microbatch, int dst, const torch::Tensor& tensor);
  // Frees the buffers of sends that completed.
  void poll_sends();
  // Waits for every send; throws if a receive was posted but never taken (a schedule/lowering bug).
  void finish();

 private:
  struct Pending {
    torch::Tensor buffer, meta;
    std::shared_ptr<comm::Work> work, meta_work;
    int src = -1;
  };
  using Key = std::tuple<int, int, int>;
  int tag(Direction direction, int producer, int microbatch, bool meta) const;
  const TensorSpec& spec(Direction direction, int producer) const;

  comm::Communicator& comm_;
  std::chrono::milliseconds timeout_;
  const std::vector<TensorSpec>& boundaries_;
  int num_stages_, num_microbatches_;
  std::map<Key, Pending> recvs_;
  struct Sent {
    torch::Tensor buffer, meta;
    std::shared_ptr<comm::Work> work, meta_work;
    int dst;
    Key key;
  };
  // Waits for `work`, rewording a CommError with the message it is about: "rank 1: waiting for 2SEND_F3 from
  // rank 2: peer rank 2 closed the connection ...".
  void wait_for(comm::Work& work, const Key& key, bool receive, int peer);
  [[noreturn]] void fail(const comm::CommError& e, const Key& key, bool receive, int peer) const;
  void post_recv(Pending& p, Direction direction, int producer, int microbatch);
  std::vector<Sent> sends_;
};

}  // namespace dualpipe::runtime::detail
