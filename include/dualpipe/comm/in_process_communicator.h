// A communicator for ranks that are threads of one process (tests, examples). Messages go through a shared
// in-memory hub: a send copies the tensor into the mailbox (src, dst, tag) and completes at once; a receive
// takes the oldest message of its mailbox when waited on. abort() wakes every waiting rank with an error, so
// a test whose rank failed ends quickly instead of waiting for the timeout. Tensors on a GPU may come from ranks
// that each queue work on their own stream: the copy and the receive are ordered by an event, not a host wait.
#pragma once

#include <chrono>
#include <memory>

#include "dualpipe/comm/communicator.h"

namespace dualpipe::comm {

class InProcessHub {
 public:
  // `single_tag`: messages are matched by (source, destination) alone, in order, as on a backend that ignores
  // tags (NCCL); the runtime must not depend on tags (channels.h).
  explicit InProcessHub(int world_size, std::chrono::milliseconds timeout = std::chrono::seconds(60),
                        bool single_tag = false);
  ~InProcessHub();
  InProcessHub(const InProcessHub&) = delete;
  InProcessHub& operator=(const InProcessHub&) = delete;

  int size() const;
  std::chrono::milliseconds timeout() const;
  // Makes every current and future wait on this hub throw CommError carrying `reason`.
  void abort(const std::string& reason);

  struct State;  // mailboxes, barrier counter; defined in the .cpp
  State& state() { return *state_; }

 private:
  std::unique_ptr<State> state_;
};

class InProcessCommunicator : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<InProcessHub> hub, int rank);

  int rank() const override { return rank_; }
  int size() const override;
  std::shared_ptr<Work> isend(const at::Tensor& tensor, int dst, int tag) override;
  std::shared_ptr<Work> irecv(at::Tensor& tensor, int src, int tag) override;
  bool matches_by_tag() const override;  // outside the single-tag mode
  void barrier() override;
  std::chrono::milliseconds timeout() const override;

 private:
  std::shared_ptr<InProcessHub> hub_;
  int rank_;
};

}  // namespace dualpipe::comm
