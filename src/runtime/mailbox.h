// The executor's messages of one step (internal).
//
// A message is the list of tensors one SEND action carries: a stage's outputs (forward), or the gradients of
// a stage's inputs that require one (backward). Between two ranks, messages travel in the order of the
// sender's SEND actions in the lowered schedule; the receiver reads that order from the same schedule
// (`incoming`), posts its receives in it and completes them in it. Nothing depends on tags, so backends that
// ignore them (NCCL) deliver the same bytes.
//
// Receives whose shapes are declared (ExecutorOptions::boundaries without -1) are all posted when the step
// starts, into buffers on the consuming stage's device. Otherwise a small header travels first (count, and
// per tensor dtype, requires_grad and shape); the message's tensors are posted when its header arrived, or with
// the header at the shapes an earlier step learned (MessageShape), and the peer's next header right after.
// Where the communicator matches by tag (Gloo), receives go ahead instead: every header of the step when it
// starts, on the headers' tag, and the tensors on theirs, in order as far as learned shapes or arrived headers
// give them, so a message's bytes move as soon as it is sent (one posted at a time, they waited for the message
// before it to be taken: about a third of a small model's step on two cores). A message unlike its guess fills
// the guessed buffers with zeros and comes again on a third tag.
// Sends are asynchronous; a send's buffers are dropped as soon as it completed.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "dualpipe/comm/communicator.h"
#include "dualpipe/runtime/boundary.h"
#include "dualpipe/runtime/flight_recorder.h"
#include "dualpipe/runtime/stage.h"

namespace dualpipe::runtime::detail {

enum class Direction : int { Forward = 0, Backward = 1 };

// (direction, producer stage, micro-batch): "2SEND_F3" is (Forward, 2, 3).
struct MessageKey {
  Direction direction = Direction::Forward;
  int producer = 0, microbatch = 0;
  bool operator==(const MessageKey& o) const {
    return direction == o.direction && producer == o.producer && microbatch == o.microbatch;
  }
  bool operator<(const MessageKey& o) const {
    return std::tie(direction, producer, microbatch) < std::tie(o.direction, o.producer, o.microbatch);
  }
};

struct Message {
  Tensors tensors;
  std::vector<bool> requires_grad;  // per tensor, as the sender had it
};

// What a boundary's messages carried at an earlier step, where every micro-batch's were alike: later steps post
// their receives at these shapes with the header (no wait for it), and a message that differs after all arrives
// after zeros of these shapes (so the receives already posted still complete in the sender's order).
struct MessageShape {
  std::vector<at::ScalarType> dtypes;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<bool> requires_grad;
  bool operator==(const MessageShape& o) const {
    return dtypes == o.dtypes && shapes == o.shapes && requires_grad == o.requires_grad;
  }
};
// By (direction, producer stage, the rank at the other end): both ends of a link learn from the same messages.
// nullopt: the micro-batches differed.
using LearnedShapes = std::map<std::tuple<Direction, int, int>, std::optional<MessageShape>>;

struct MailboxSetup {
  comm::Communicator* communicator = nullptr;
  std::chrono::milliseconds timeout{0};
  const std::vector<BoundarySpec>* boundaries = nullptr;  // empty: shapes always travel
  std::vector<c10::Device> stage_devices;                // where each stage's received tensors go
  // Communicator rank -> the messages it sends this rank, in its sending order.
  std::map<int, std::vector<MessageKey>> incoming;
  // Kept across steps by the executor; learned from this step's messages when it completes (null: none).
  LearnedShapes* learned = nullptr;
  FlightRecorder* flight = nullptr;  // told of every message and wait (null: none)
};

class Mailbox {
 public:
  explicit Mailbox(MailboxSetup setup);
  ~Mailbox();

  // Waits for the message and returns it; the messages before it from the same sender complete first.
  Message take(const MessageKey& key);
  // Sends asynchronously to communicator rank `dst`.
  void send(const MessageKey& key, int dst, const Tensors& tensors);
  // Drops the buffers of sends that completed.
  void poll_sends();
  // Waits for every send; throws if a message was expected but never taken (a schedule/lowering bug). Then
  // learns the step's message shapes.
  void finish();

 private:
  struct Incoming;
  struct Peer;
  struct Sent;
  bool shapes_travel(const MessageKey& key) const;
  const BoundarySpec* declared(const MessageKey& key) const;
  void post(Peer& peer);
  void post_headers(Peer& peer);
  void post_header(Peer& peer, Incoming& in);
  void post_tensors(Peer& peer, Incoming& in, const MessageShape& shape, int tag);
  static void set_aside_guess(Incoming& in);
  bool matches_guess(const Incoming& in, const Peer& peer, const MessageShape& sent) const;
  MessageShape declared_shape(const MessageKey& key) const;
  const MessageShape* guess(const MessageKey& key, int peer) const;
  void learn(const MessageKey& key, int peer, const MessageShape& shape);
  void complete(Peer& peer, Incoming& message);
  void wait_for(comm::Work& work, const MessageKey& key, bool receive, int peer);
  void record_wait(const MessageKey& key, int peer, bool receive, int position);
  [[noreturn]] void fail(const comm::CommError& e, const MessageKey& key, bool receive, int peer) const;

  MailboxSetup setup_;
  bool ahead_;  // receives posted ahead: the communicator matches by tag
  int tag_;         // headers (and everything, in order alone)
  int tensor_tag_;  // tensors
  int resent_tag_;  // tensors sent again after the zeros of a wrong guess
  std::map<int, Peer> peers_;                  // by communicator rank
  std::map<MessageKey, std::pair<int, size_t>> where_;  // message -> (sender, index in its queue)
  std::vector<Sent> sends_;
  LearnedShapes seen_;  // this step's, merged into setup_.learned by finish()
};

}  // namespace dualpipe::runtime::detail
