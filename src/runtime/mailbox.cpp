#include "mailbox.h"

#include <torch/torch.h>

#include <algorithm>

#include "dualpipe/runtime/replicas.h"

namespace dualpipe::runtime::detail {
namespace {
constexpr int kMaxDims = 8;  // shapes exchanged at run time: [dtype, ndim, d0 .. d7]
}

Mailbox::Mailbox(comm::Communicator& communicator, std::chrono::milliseconds timeout,
                 const std::vector<TensorSpec>& boundaries, int num_stages, int num_microbatches)
    : comm_(communicator),
      timeout_(timeout),
      boundaries_(boundaries),
      num_stages_(num_stages),
      num_microbatches_(num_microbatches) {
  DUALPIPE_REQUIRE(static_cast<long long>(num_stages) * num_microbatches * 4 < kReplicaTagBase,
                   "too many stages x micro-batches for the message tag space: S=", num_stages,
                   " M=", num_microbatches);
}

int Mailbox::tag(Direction direction, int producer, int microbatch, bool meta) const {
  return ((microbatch * num_stages_ + producer) * 2 + static_cast<int>(direction)) * 2 + (meta ? 1 : 0);
}

// A forward message carries the producer's output (boundary producer+1); a backward message the gradient of
// the producer's input (boundary producer).
const TensorSpec& Mailbox::spec(Direction direction, int producer) const {
  return boundaries_[static_cast<size_t>(direction == Direction::Forward ? producer + 1 : producer)];
}

void Mailbox::wait_for(comm::Work& work, const Key& key, bool receive, int peer) {
  try {
    work.wait(timeout_);
  } catch (const comm::CommError& e) {
    fail(e, key, receive, peer);
  }
}

void Mailbox::fail(const comm::CommError& e, const Key& key, bool receive, int peer) const {
  auto [direction, producer, microbatch] = key;
  const char* kind = direction == static_cast<int>(Direction::Forward) ? "SEND_F" : "SEND_B";
  throw comm::CommError(dualpipe::detail::concat("rank ", comm_.rank(), ": ", receive ? "waiting for " : "sending ",
                                                 producer, kind, microbatch, receive ? " from rank " : " to rank ",
                                                 peer, ": ", e.reason()),
                        e.rank(), e.reason());
}

void Mailbox::post_recv(Direction direction, int producer, int microbatch, int src) {
  Pending p;
  p.src = src;
  const Key key{static_cast<int>(direction), producer, microbatch};
  try {
    post_recv(p, direction, producer, microbatch);
  } catch (const comm::CommError& e) {
    fail(e, key, true, src);
  }
  bool inserted = recvs_.emplace(key, std::move(p)).second;
  DUALPIPE_CHECK(inserted, "receive posted twice");
}

void Mailbox::post_recv(Pending& p, Direction direction, int producer, int microbatch) {
  const int src = p.src;
  if (boundaries_.empty()) {
    p.meta = torch::empty({2 + kMaxDims}, torch::kLong);
    p.meta_work = comm_.irecv(p.meta, src, tag(direction, producer, microbatch, true));
  } else {
    const TensorSpec& s = spec(direction, producer);
    p.buffer = torch::empty(s.shape, torch::TensorOptions().dtype(s.dtype));
    p.work = comm_.irecv(p.buffer, src, tag(direction, producer, microbatch, false));
  }
}

torch::Tensor Mailbox::take(Direction direction, int producer, int microbatch) {
  auto it = recvs_.find(Key{static_cast<int>(direction), producer, microbatch});
  DUALPIPE_CHECK(it != recvs_.end(), "receive of a message that was never posted");
  Pending p = std::move(it->second);
  recvs_.erase(it);
  const Key key = it->first;
  if (p.meta_work) {
    wait_for(*p.meta_work, key, true, p.src);
    auto m = p.meta.accessor<int64_t, 1>();
    std::vector<int64_t> shape(m.data() + 2, m.data() + 2 + m[1]);
    p.buffer = torch::empty(shape, torch::TensorOptions().dtype(static_cast<at::ScalarType>(m[0])));
    try {
      p.work = comm_.irecv(p.buffer, p.src, tag(direction, producer, microbatch, false));
    } catch (const comm::CommError& e) {
      fail(e, key, true, p.src);
    }
  }
  wait_for(*p.work, key, true, p.src);
  return p.buffer;
}

void Mailbox::send(Direction direction, int producer, int microbatch, int dst, const torch::Tensor& tensor) {
  Sent s;
  s.dst = dst;
  s.key = Key{static_cast<int>(direction), producer, microbatch};
  s.buffer = tensor.detach().contiguous();
  if (boundaries_.empty()) {
    DUALPIPE_REQUIRE(s.buffer.dim() <= kMaxDims, "tensors sent between stages have at most ", kMaxDims,
                     " dimensions, got ", s.buffer.dim());
    s.meta = torch::zeros({2 + kMaxDims}, torch::kLong);
    auto m = s.meta.accessor<int64_t, 1>();
    m[0] = static_cast<int64_t>(s.buffer.scalar_type());
    m[1] = s.buffer.dim();
    for (int64_t d = 0; d < s.buffer.dim(); ++d) m[2 + d] = s.buffer.size(d);
    try {
      s.meta_work = comm_.isend(s.meta, dst, tag(direction, producer, microbatch, true));
    } catch (const comm::CommError& e) {
      fail(e, s.key, false, dst);
    }
  }
  try {
    s.work = comm_.isend(s.buffer, dst, tag(direction, producer, microbatch, false));
  } catch (const comm::CommError& e) {
    fail(e, s.key, false, dst);
  }
  sends_.push_back(std::move(s));
}

// Runs after every action: in place, so the common case (nothing completed yet; with Gloo a send only reports
// completion once waited on) moves nothing and allocates nothing.
void Mailbox::poll_sends() {
  auto completed = [&](Sent& s) {
    if (!s.work->is_completed() || (s.meta_work && !s.meta_work->is_completed())) return false;
    wait_for(*s.work, s.key, false, s.dst);  // surfaces a failed transfer
    if (s.meta_work) wait_for(*s.meta_work, s.key, false, s.dst);
    return true;
  };
  sends_.erase(std::remove_if(sends_.begin(), sends_.end(), completed), sends_.end());
}

void Mailbox::finish() {
  for (auto& s : sends_) {
    if (s.meta_work) wait_for(*s.meta_work, s.key, false, s.dst);
    wait_for(*s.work, s.key, false, s.dst);
  }
  sends_.clear();
  DUALPIPE_CHECK(recvs_.empty(), recvs_.size(), " posted receives were never consumed");
}

}  // namespace dualpipe::runtime::detail
