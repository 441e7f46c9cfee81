#include "mailbox.h"

#include <torch/torch.h>

#include <algorithm>

#include "dualpipe/comm/channels.h"

namespace dualpipe::runtime::detail {
namespace {

// Header of a message whose shapes travel: [count, then per tensor: dtype, requires_grad, ndim, d0 ..].
constexpr int64_t kHeaderWords = 64;

bool is_floating(at::ScalarType t) { return at::isFloatingType(t) || at::isComplexType(t); }

// The tensors of a backward message are the gradients of the boundary's tensors that carry one.
BoundarySpec gradient_specs(const BoundarySpec& boundary) {
  BoundarySpec specs;
  for (const TensorSpec& s : boundary)
    if (s.requires_grad && is_floating(s.dtype)) specs.push_back(s);
  return specs;
}

// The tensors a header describes.
MessageShape header_shape(const torch::Tensor& header) {
  MessageShape shape;
  const int64_t* h = header.data_ptr<int64_t>();
  int64_t at = 1;
  for (int64_t i = 0; i < h[0]; ++i) {
    shape.dtypes.push_back(static_cast<at::ScalarType>(h[at]));
    shape.requires_grad.push_back(h[at + 1] != 0);
    shape.shapes.emplace_back(h + at + 3, h + at + 3 + h[at + 2]);
    at += 3 + h[at + 2];
  }
  return shape;
}

// The SEND action that carries the message, as the flight recorder names messages.
Action send_action(const MessageKey& key, int peer) {
  return Action::communication(key.direction == Direction::Forward ? ActionType::SendForward : ActionType::SendBackward,
                               key.producer, key.microbatch, peer);
}

int64_t bytes_of(const Tensors& tensors) {
  int64_t bytes = 0;
  for (const auto& t : tensors) bytes += static_cast<int64_t>(t.nbytes());
  return bytes;
}

std::string key_text(const MessageKey& key) {
  return dualpipe::detail::concat(key.producer, key.direction == Direction::Forward ? "SEND_F" : "SEND_B",
                                  key.microbatch);
}

}  // namespace

struct Mailbox::Incoming {
  MessageKey key;
  bool header_arrived = false, posted = false, completed = false, taken = false;
  torch::Tensor header;
  std::shared_ptr<comm::Work> header_work;
  Message message;
  std::vector<std::shared_ptr<comm::Work>> works;
  bool guessed = false;                                // tensors posted at learned shapes with the header
  Tensors guessed_buffers;                             // they were not the message's: the sender's zeros land here
  std::vector<std::shared_ptr<comm::Work>> dummies;
};

struct Mailbox::Peer {
  int rank = -1;
  std::vector<Incoming> queue;
  size_t next_header = 0;  // with receives ahead: the headers are posted up to here
  size_t next_to_post = 0, next_to_complete = 0;
};

struct Mailbox::Sent {
  MessageKey key;
  int dst = -1;
  Tensors buffers;
  std::vector<std::shared_ptr<comm::Work>> works;
};

Mailbox::Mailbox(MailboxSetup setup)
    : setup_(std::move(setup)),
      ahead_(setup_.communicator->matches_by_tag()),
      tag_(comm::tag(comm::Channel::Pipeline)),
      tensor_tag_(ahead_ ? comm::tag(comm::Channel::PipelineTensors) : tag_),
      resent_tag_(ahead_ ? comm::tag(comm::Channel::PipelineResent) : tag_) {
  for (const auto& [src, keys] : setup_.incoming) {
    Peer& peer = peers_[src];
    peer.rank = src;
    for (const MessageKey& key : keys) {
      where_[key] = {src, peer.queue.size()};
      peer.queue.emplace_back();
      peer.queue.back().key = key;
    }
  }
  // Declared messages are posted now, each peer's up to its first message whose shapes travel (with receives
  // ahead: every header, and the tensors as far as their shapes are known).
  for (auto& [src, peer] : peers_) post(peer);
}

Mailbox::~Mailbox() = default;

const BoundarySpec* Mailbox::declared(const MessageKey& key) const {
  if (setup_.boundaries == nullptr || setup_.boundaries->empty()) return nullptr;
  // A forward message carries the producer's outputs (boundary producer+1); a backward one the gradients of
  // the producer's inputs (boundary producer).
  const int b = key.direction == Direction::Forward ? key.producer + 1 : key.producer;
  return &(*setup_.boundaries)[static_cast<size_t>(b)];
}

bool Mailbox::shapes_travel(const MessageKey& key) const {
  const BoundarySpec* specs = declared(key);
  if (specs == nullptr) return true;
  return std::any_of(specs->begin(), specs->end(), [](const TensorSpec& s) {
    return std::find(s.shape.begin(), s.shape.end(), -1) != s.shape.end();
  });
}

void Mailbox::fail(const comm::CommError& e, const MessageKey& key, bool receive, int peer) const {
  throw comm::CommError(dualpipe::detail::concat("rank ", setup_.communicator->rank(), ": ",
                                                 receive ? "waiting for " : "sending ", key_text(key),
                                                 receive ? " from rank " : " to rank ", peer, ": ", e.reason()),
                        e.rank(), e.reason(), e.invalid_input());
}

void Mailbox::wait_for(comm::Work& work, const MessageKey& key, bool receive, int peer) {
  try {
    work.wait(setup_.timeout);
  } catch (const comm::CommError& e) {
    fail(e, key, receive, peer);
  }
}

// Posts the peer's receives in its sending order, as far as their shapes are known. In order alone (a
// communicator that does not match by tag): a message whose shapes travel gets its header posted, with its
// tensors at the learned shapes if any, and stops the walk until the header arrived (complete() resumes it).
// Ahead (one that matches by tag): every header at once on its own tag, and the tensors, on theirs, in order as
// far as learned shapes or arrived headers give them; a wrong guess is mended in complete().
void Mailbox::post(Peer& peer) {
  if (ahead_) post_headers(peer);
  while (peer.next_to_post < peer.queue.size()) {
    Incoming& in = peer.queue[peer.next_to_post];
    try {
      if (!shapes_travel(in.key)) {
        post_tensors(peer, in, declared_shape(in.key), tensor_tag_);
      } else if (ahead_) {
        if (const MessageShape* g = guess(in.key, peer.rank)) {
          post_tensors(peer, in, *g, tensor_tag_);
          in.guessed = true;
        } else if (in.header_arrived) {
          post_tensors(peer, in, header_shape(in.header), tensor_tag_);
        } else {
          return;  // complete() waits for the header and resumes
        }
      } else if (!in.header.defined()) {
        post_header(peer, in);
        if (const MessageShape* g = guess(in.key, peer.rank)) {
          post_tensors(peer, in, *g, tag_);
          in.guessed = true;
        }
        return;
      } else if (!in.header_arrived) {
        return;  // complete() waits for it and resumes
      } else if (const MessageShape sent = header_shape(in.header); !in.guessed || !matches_guess(in, peer, sent)) {
        if (in.guessed) set_aside_guess(in);  // the sender's zeros arrive in the buffers posted at the guess
        post_tensors(peer, in, sent, tag_);
      }
    } catch (const comm::CommError& e) {
      fail(e, in.key, true, peer.rank);
    }
    in.posted = true;
    ++peer.next_to_post;
  }
}

void Mailbox::post_headers(Peer& peer) {
  for (; peer.next_header < peer.queue.size(); ++peer.next_header) {
    Incoming& in = peer.queue[peer.next_header];
    if (!shapes_travel(in.key)) continue;
    try {
      post_header(peer, in);
    } catch (const comm::CommError& e) {
      fail(e, in.key, true, peer.rank);
    }
  }
}

void Mailbox::post_header(Peer& peer, Incoming& in) {
  in.header = torch::empty({kHeaderWords}, torch::kLong);
  in.header_work = setup_.communicator->irecv(in.header, peer.rank, tag_);
}

void Mailbox::post_tensors(Peer& peer, Incoming& in, const MessageShape& shape, int tag) {
  const int consumer = in.key.direction == Direction::Forward ? in.key.producer + 1 : in.key.producer - 1;
  const c10::Device device = setup_.stage_devices.at(static_cast<size_t>(consumer));
  for (size_t i = 0; i < shape.shapes.size(); ++i) {
    const auto options = torch::TensorOptions().dtype(shape.dtypes[i]).device(device);
    in.message.tensors.push_back(torch::empty(shape.shapes[i], options));
    if (in.message.tensors.back().numel() > 0)
      in.works.push_back(setup_.communicator->irecv(in.message.tensors.back(), peer.rank, tag));
  }
  in.message.requires_grad = shape.requires_grad;
}

bool Mailbox::matches_guess(const Incoming& in, const Peer& peer, const MessageShape& sent) const {
  return sent == *guess(in.key, peer.rank);
}

// The buffers posted at a guess the message did not match: the sender's zeros land there, its tensors after.
void Mailbox::set_aside_guess(Incoming& in) {
  in.guessed_buffers = std::move(in.message.tensors);
  in.dummies = std::move(in.works);
  in.message = Message{};
  in.works.clear();
}

// A declared message's tensors: a forward one's the boundary's, a backward one's the gradients of those that carry
// one.
MessageShape Mailbox::declared_shape(const MessageKey& key) const {
  const BoundarySpec specs = key.direction == Direction::Forward ? *declared(key) : gradient_specs(*declared(key));
  MessageShape shape;
  for (const TensorSpec& t : specs) {
    shape.dtypes.push_back(t.dtype);
    shape.shapes.push_back(t.shape);
    shape.requires_grad.push_back(t.requires_grad && is_floating(t.dtype));
  }
  return shape;
}

void Mailbox::record_wait(const MessageKey& key, int peer, bool receive, int position) {
  if (setup_.flight != nullptr) setup_.flight->waiting_for(send_action(key, peer), peer, receive, position);
}

void Mailbox::complete(Peer& peer, Incoming& in) {
  record_wait(in.key, peer.rank, true, static_cast<int>(&in - peer.queue.data()));
  if (in.header_work && !in.header_arrived) {
    wait_for(*in.header_work, in.key, true, peer.rank);
    in.header_arrived = true;
    if (const MessageShape sent = header_shape(in.header); ahead_ && in.guessed && !matches_guess(in, peer, sent)) {
      set_aside_guess(in);  // its tensors come again, at their own shapes, on their own tag
      try {
        post_tensors(peer, in, sent, resent_tag_);
      } catch (const comm::CommError& e) {
        fail(e, in.key, true, peer.rank);
      }
    }
    post(peer);
  }
  DUALPIPE_CHECK(in.posted, "message ", key_text(in.key), " could not be posted");
  for (auto& work : in.dummies) wait_for(*work, in.key, true, peer.rank);
  for (auto& work : in.works) wait_for(*work, in.key, true, peer.rank);
  in.dummies.clear();
  in.guessed_buffers.clear();
  in.works.clear();
  if (in.header.defined()) learn(in.key, peer.rank, header_shape(in.header));
  in.header_work.reset();
  in.completed = true;
  if (setup_.flight != nullptr) setup_.flight->message_received(bytes_of(in.message.tensors));
}

Message Mailbox::take(const MessageKey& key) {
  auto it = where_.find(key);
  DUALPIPE_CHECK(it != where_.end(), "receive of ", key_text(key), ", which no rank sends here");
  Peer& peer = peers_.at(it->second.first);
  const size_t index = it->second.second;
  // In the sender's order: a backend that matches receives by order alone (NCCL, the in-process hub) must see
  // the earlier messages waited on first.
  while (peer.next_to_complete <= index) complete(peer, peer.queue[peer.next_to_complete++]);
  post(peer);  // the next header, now that this message's tensors are posted
  Incoming& in = peer.queue[index];
  DUALPIPE_CHECK(!in.taken, "message ", key_text(key), " taken twice");
  in.taken = true;
  return std::move(in.message);
}

void Mailbox::send(const MessageKey& key, int dst, const Tensors& tensors) {
  auto& comm = *setup_.communicator;
  Sent sent;
  sent.key = key;
  sent.dst = dst;
  int tag = tensor_tag_;  // the tensors' own, unless they follow the zeros of a wrong guess
  try {
    if (shapes_travel(key)) {
      torch::Tensor header = torch::zeros({kHeaderWords}, torch::kLong);
      int64_t* h = header.data_ptr<int64_t>();
      int64_t at = 1;
      h[0] = static_cast<int64_t>(tensors.size());
      for (const auto& t : tensors) {
        DUALPIPE_REQUIRE(at + 3 + t.dim() <= kHeaderWords, "message ", key_text(key), " has ", tensors.size(),
                         " tensors whose shapes do not fit in the ", kHeaderWords,
                         "-word header; declare the boundary's shapes (ExecutorOptions::boundaries)");
        h[at] = static_cast<int64_t>(t.scalar_type());
        h[at + 1] = t.requires_grad() ? 1 : 0;
        h[at + 2] = t.dim();
        for (int64_t d = 0; d < t.dim(); ++d) h[at + 3 + d] = t.size(d);
        at += 3 + t.dim();
      }
      sent.buffers.push_back(header);
      sent.works.push_back(comm.isend(header, dst, tag_));
      const MessageShape shape = header_shape(header);
      const MessageShape* g = guess(key, dst);
      if (g != nullptr && !(shape == *g)) {  // the receiver posted these shapes: fill them before the real ones
        const c10::Device device = tensors.empty() ? c10::Device(c10::kCPU) : tensors[0].device();
        for (size_t i = 0; i < g->shapes.size(); ++i) {
          const auto options = torch::TensorOptions().dtype(g->dtypes[i]).device(device);
          sent.buffers.push_back(torch::zeros(g->shapes[i], options));
          if (sent.buffers.back().numel() > 0)
            sent.works.push_back(comm.isend(sent.buffers.back(), dst, tensor_tag_));
        }
        tag = resent_tag_;
      }
      learn(key, dst, shape);
    }
    for (const auto& t : tensors) {
      if (t.numel() == 0) continue;
      sent.buffers.push_back(t.detach().contiguous());
      sent.works.push_back(comm.isend(sent.buffers.back(), dst, tag));
    }
  } catch (const comm::CommError& e) {
    fail(e, key, false, dst);
  }
  if (setup_.flight != nullptr) setup_.flight->message_sent(send_action(key, dst), dst, bytes_of(tensors));
  sends_.push_back(std::move(sent));
}

// Runs after every action: in place, so the common case (nothing completed yet) moves nothing and allocates
// nothing.
void Mailbox::poll_sends() {
  auto completed = [&](Sent& s) {
    for (auto& w : s.works)
      if (!w->is_completed()) return false;
    for (auto& w : s.works) wait_for(*w, s.key, false, s.dst);  // surfaces a failed transfer
    return true;
  };
  sends_.erase(std::remove_if(sends_.begin(), sends_.end(), completed), sends_.end());
}

void Mailbox::finish() {
  for (auto& s : sends_) {
    record_wait(s.key, s.dst, false, 0);
    for (auto& w : s.works) wait_for(*w, s.key, false, s.dst);
  }
  if (setup_.flight != nullptr) setup_.flight->wait_ended();
  sends_.clear();
  for (const auto& [src, peer] : peers_)
    for (const Incoming& in : peer.queue)
      DUALPIPE_CHECK(in.taken, "message ", key_text(in.key), " from rank ", src, " was never taken");
  if (setup_.learned != nullptr)
    for (const auto& [boundary, shape] : seen_) (*setup_.learned)[boundary] = shape;
}

// What a boundary's messages of the earlier steps carried, where they were alike (else null).
const MessageShape* Mailbox::guess(const MessageKey& key, int peer) const {
  if (setup_.learned == nullptr) return nullptr;
  auto it = setup_.learned->find({key.direction, key.producer, peer});
  return it == setup_.learned->end() || !it->second ? nullptr : &*it->second;
}

// Both ends of a message learn the same shape from it (what the sender's header says), so they agree on the
// guess of the next step.
void Mailbox::learn(const MessageKey& key, int peer, const MessageShape& shape) {
  auto [it, first] = seen_.try_emplace({key.direction, key.producer, peer}, shape);
  if (!first && it->second && !(*it->second == shape)) it->second.reset();
}

}  // namespace dualpipe::runtime::detail
