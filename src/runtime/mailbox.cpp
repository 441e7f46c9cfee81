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
  size_t next_to_post = 0, next_to_complete = 0;
};

struct Mailbox::Sent {
  MessageKey key;
  int dst = -1;
  Tensors buffers;
  std::vector<std::shared_ptr<comm::Work>> works;
};

Mailbox::Mailbox(MailboxSetup setup) : setup_(std::move(setup)), tag_(comm::tag(comm::Channel::Pipeline)) {
  for (const auto& [src, keys] : setup_.incoming) {
    Peer& peer = peers_[src];
    peer.rank = src;
    for (const MessageKey& key : keys) {
      where_[key] = {src, peer.queue.size()};
      peer.queue.emplace_back();
      peer.queue.back().key = key;
    }
  }
  // Declared messages are posted now, each peer's up to its first message whose shapes travel.
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

// Posts the peer's receives in its sending order, as far as their shapes are known: a message whose shapes
// travel gets its header posted, and stops the walk until the header arrived (complete() resumes it).
void Mailbox::post(Peer& peer) {
  auto& comm = *setup_.communicator;
  while (peer.next_to_post < peer.queue.size()) {
    Incoming& in = peer.queue[peer.next_to_post];
    const int consumer = in.key.direction == Direction::Forward ? in.key.producer + 1 : in.key.producer - 1;
    const auto options = [&](at::ScalarType dtype) {
      return torch::TensorOptions().dtype(dtype).device(setup_.stage_devices.at(static_cast<size_t>(consumer)));
    };
    std::vector<std::vector<int64_t>> shapes;
    std::vector<at::ScalarType> dtypes;
    try {
      if (shapes_travel(in.key)) {
        if (!in.header.defined()) {
          in.header = torch::empty({kHeaderWords}, torch::kLong);
          in.header_work = comm.irecv(in.header, peer.rank, tag_);
          if (const MessageShape* g = guess(in.key, peer.rank)) {
            for (size_t i = 0; i < g->shapes.size(); ++i) {
              in.message.tensors.push_back(torch::empty(g->shapes[i], options(g->dtypes[i])));
              if (in.message.tensors.back().numel() > 0)
                in.works.push_back(comm.irecv(in.message.tensors.back(), peer.rank, tag_));
            }
            in.message.requires_grad = g->requires_grad;
            in.guessed = true;
          }
          return;
        }
        if (!in.header_arrived) return;  // complete() waits for it and resumes
        const MessageShape sent = header_shape(in.header);
        if (in.guessed && sent == *guess(in.key, peer.rank)) {
          in.posted = true;
          ++peer.next_to_post;
          continue;
        }
        if (in.guessed) {  // the sender's zeros arrive in the buffers posted at the guess, its tensors after them
          in.guessed_buffers = std::move(in.message.tensors);
          in.dummies = std::move(in.works);
          in.message = Message{};
          in.works.clear();
        }
        dtypes = sent.dtypes;
        shapes = sent.shapes;
        in.message.requires_grad = sent.requires_grad;
      } else {
        const BoundarySpec specs =
            in.key.direction == Direction::Forward ? *declared(in.key) : gradient_specs(*declared(in.key));
        for (const TensorSpec& s : specs) {
          dtypes.push_back(s.dtype);
          shapes.push_back(s.shape);
          in.message.requires_grad.push_back(s.requires_grad && is_floating(s.dtype));
        }
      }
      for (size_t i = 0; i < shapes.size(); ++i) {
        in.message.tensors.push_back(torch::empty(shapes[i], options(dtypes[i])));
        if (in.message.tensors.back().numel() > 0)
          in.works.push_back(comm.irecv(in.message.tensors.back(), peer.rank, tag_));
      }
    } catch (const comm::CommError& e) {
      fail(e, in.key, true, peer.rank);
    }
    in.posted = true;
    ++peer.next_to_post;
  }
}

void Mailbox::record_wait(const MessageKey& key, int peer, bool receive, int position) {
  if (setup_.flight != nullptr) setup_.flight->waiting_for(send_action(key, peer), peer, receive, position);
}

void Mailbox::complete(Peer& peer, Incoming& in) {
  record_wait(in.key, peer.rank, true, static_cast<int>(&in - peer.queue.data()));
  if (in.header_work && !in.header_arrived) {
    wait_for(*in.header_work, in.key, true, peer.rank);
    in.header_arrived = true;
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
          if (sent.buffers.back().numel() > 0) sent.works.push_back(comm.isend(sent.buffers.back(), dst, tag_));
        }
      }
      learn(key, dst, shape);
    }
    for (const auto& t : tensors) {
      if (t.numel() == 0) continue;
      sent.buffers.push_back(t.detach().contiguous());
      sent.works.push_back(comm.isend(sent.buffers.back(), dst, tag_));
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
