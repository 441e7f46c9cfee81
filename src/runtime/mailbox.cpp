#include "mailbox.h"

#include <torch/torch.h>

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

void Mailbox::post_recv(Direction direction, int producer, int microbatch, int src) {
  Pending p;
  p.src = src;
  if (boundaries_.empty()) {
    p.meta = torch::empty({2 + kMaxDims}, torch::kLong);
    p.meta_work = comm_.irecv(p.meta, src, tag(direction, producer, microbatch, true));
  } else {
    const TensorSpec& s = spec(direction, producer);
    p.buffer = torch::empty(s.shape, torch::TensorOptions().dtype(s.dtype));
    p.work = comm_.irecv(p.buffer, src, tag(direction, producer, microbatch, false));
  }
  bool inserted = recvs_.emplace(Key{static_cast<int>(direction), producer, microbatch}, std::move(p)).second;
  DUALPIPE_CHECK(inserted, "receive posted twice");
}

torch::Tensor Mailbox::take(Direction direction, int producer, int microbatch) {
  auto it = recvs_.find(Key{static_cast<int>(direction), producer, microbatch});
  DUALPIPE_CHECK(it != recvs_.end(), "receive of a message that was never posted");
  Pending p = std::move(it->second);
  recvs_.erase(it);
  if (p.meta_work) {
    p.meta_work->wait(timeout_);
    auto m = p.meta.accessor<int64_t, 1>();
    std::vector<int64_t> shape(m.data() + 2, m.data() + 2 + m[1]);
    p.buffer = torch::empty(shape, torch::TensorOptions().dtype(static_cast<at::ScalarType>(m[0])));
    p.work = comm_.irecv(p.buffer, p.src, tag(direction, producer, microbatch, false));
  }
  p.work->wait(timeout_);
  return p.buffer;
}

void Mailbox::send(Direction direction, int producer, int microbatch, int dst, const torch::Tensor& tensor) {
  Sent s;
  s.dst = dst;
  s.buffer = tensor.detach().contiguous();
  if (boundaries_.empty()) {
    DUALPIPE_REQUIRE(s.buffer.dim() <= kMaxDims, "tensors sent between stages have at most ", kMaxDims,
                     " dimensions, got ", s.buffer.dim());
    s.meta = torch::zeros({2 + kMaxDims}, torch::kLong);
    auto m = s.meta.accessor<int64_t, 1>();
    m[0] = static_cast<int64_t>(s.buffer.scalar_type());
    m[1] = s.buffer.dim();
    for (int64_t d = 0; d < s.buffer.dim(); ++d) m[2 + d] = s.buffer.size(d);
    s.meta_work = comm_.isend(s.meta, dst, tag(direction, producer, microbatch, true));
  }
  s.work = comm_.isend(s.buffer, dst, tag(direction, producer, microbatch, false));
  sends_.push_back(std::move(s));
}

void Mailbox::poll_sends() {
  std::vector<Sent> still;
  for (auto& s : sends_) {
    bool done = s.work->is_completed() && (!s.meta_work || s.meta_work->is_completed());
    if (done) {
      s.work->wait(timeout_);  // surfaces a failed transfer
      if (s.meta_work) s.meta_work->wait(timeout_);
    } else {
      still.push_back(std::move(s));
    }
  }
  sends_ = std::move(still);
}

void Mailbox::finish() {
  for (auto& s : sends_) {
    if (s.meta_work) s.meta_work->wait(timeout_);
    s.work->wait(timeout_);
  }
  sends_.clear();
  DUALPIPE_CHECK(recvs_.empty(), recvs_.size(), " posted receives were never consumed");
}

}  // namespace dualpipe::runtime::detail
