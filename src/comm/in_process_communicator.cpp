#include "dualpipe/comm/in_process_communicator.h"

#include <ATen/ATen.h>
#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

namespace dualpipe::comm {

namespace {

// The sender's private copy of a tensor. On a device, the copy is queued on the sender's current stream and may not
// have run yet: `copied` is recorded after it, and the receiver's stream waits on it before reading the copy.
struct Message {
  at::Tensor tensor;
  std::optional<c10::Event> copied;
};

c10::Stream current_stream(const c10::Device& device) {
  return c10::impl::VirtualGuardImpl(device.type()).getStream(device);
}

}  // namespace

struct InProcessHub::State {
  int world_size = 0;
  std::chrono::milliseconds timeout{0};
  bool single_tag = false;
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::tuple<int, int, int>, std::deque<Message>> mailboxes;  // (src, dst, tag) -> FIFO
  int mailbox_tag(int tag) const { return single_tag ? 0 : tag; }
  std::string abort_reason;  // non-empty once aborted
  int barrier_arrived = 0;
  long barrier_generation = 0;
};

InProcessHub::InProcessHub(int world_size, std::chrono::milliseconds timeout, bool single_tag) : state_(new State) {
  DUALPIPE_REQUIRE(world_size >= 1, "InProcessHub needs at least one rank, got ", world_size);
  state_->world_size = world_size;
  state_->timeout = timeout;
  state_->single_tag = single_tag;
}

InProcessHub::~InProcessHub() = default;

int InProcessHub::size() const { return state_->world_size; }
std::chrono::milliseconds InProcessHub::timeout() const { return state_->timeout; }

void InProcessHub::abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (state_->abort_reason.empty()) state_->abort_reason = reason.empty() ? "aborted" : reason;
  state_->changed.notify_all();
}

namespace {

// Sends complete when posted: the hub holds a private copy of the tensor.
class DoneWork : public Work {
 public:
  void wait(std::chrono::milliseconds) override {}
  bool is_completed() override { return true; }
};

class RecvWork : public Work {
 public:
  RecvWork(InProcessHub::State& state, at::Tensor target, int src, int dst, int tag)
      : state_(state), target_(std::move(target)), src_(src), dst_(dst), tag_(tag) {}

  void wait(std::chrono::milliseconds timeout) override {
    if (done_) return;
    std::unique_lock<std::mutex> lock(state_.mutex);
    auto& box = state_.mailboxes[{src_, dst_, tag_}];
    bool ready = state_.changed.wait_for(lock, timeout,
                                         [&] { return !box.empty() || !state_.abort_reason.empty(); });
    if (!state_.abort_reason.empty())
      throw CommError(detail::concat("rank ", dst_, ": receive from rank ", src_, " (tag ", tag_,
                                     ") aborted: ", state_.abort_reason),
                      -1, detail::concat("aborted: ", state_.abort_reason));
    if (!ready)
      throw CommError(detail::concat("rank ", dst_, ": receive from rank ", src_, " (tag ", tag_,
                                     ") timed out after ", timeout.count(), " ms"),
                      src_, detail::concat("timed out after ", timeout.count(), " ms"));
    Message received = std::move(box.front());
    box.pop_front();
    lock.unlock();
    const at::Tensor& message = received.tensor;
    if (message.sizes() != target_.sizes() || message.scalar_type() != target_.scalar_type())
      throw CommError(detail::concat("rank ", dst_, ": message from rank ", src_, " (tag ", tag_, ") has shape ",
                                     message.sizes(), " ", message.scalar_type(), ", the receive expects ",
                                     target_.sizes(), " ", target_.scalar_type()));
    if (received.copied) {
      // Ranks as threads on one GPU each queue work on their own stream: read the copy after it was made, and keep
      // its memory from the sender's stream until this stream has read it.
      const c10::Stream stream = current_stream(target_.device());
      received.copied->block(stream);
      if (message.device() == target_.device()) message.record_stream(stream);
    }
    target_.copy_(message);
    done_ = true;
  }

  bool is_completed() override {
    if (done_) return true;
    std::lock_guard<std::mutex> lock(state_.mutex);
    auto it = state_.mailboxes.find({src_, dst_, tag_});
    return it != state_.mailboxes.end() && !it->second.empty();
  }

 private:
  InProcessHub::State& state_;
  at::Tensor target_;
  int src_, dst_, tag_;
  bool done_ = false;
};

}  // namespace

InProcessCommunicator::InProcessCommunicator(std::shared_ptr<InProcessHub> hub, int rank)
    : hub_(std::move(hub)), rank_(rank) {
  DUALPIPE_REQUIRE(hub_ != nullptr, "InProcessCommunicator needs a hub");
  DUALPIPE_REQUIRE(rank >= 0 && rank < hub_->size(), "rank ", rank, " is outside the hub's ", hub_->size(),
                   " ranks");
}

int InProcessCommunicator::size() const { return hub_->size(); }
std::chrono::milliseconds InProcessCommunicator::timeout() const { return hub_->timeout(); }
bool InProcessCommunicator::matches_by_tag() const { return !hub_->state().single_tag; }

std::shared_ptr<Work> InProcessCommunicator::isend(const at::Tensor& tensor, int dst, int tag) {
  DUALPIPE_REQUIRE(dst >= 0 && dst < size() && dst != rank_, "rank ", rank_, " cannot send to rank ", dst);
  DUALPIPE_REQUIRE(tag >= 0, "message tags must be >= 0, got ", tag);
  auto& state = hub_->state();
  Message message{tensor.detach().clone(at::MemoryFormat::Contiguous), std::nullopt};
  if (!message.tensor.is_cpu()) {
    message.copied.emplace(message.tensor.device().type());
    message.copied->record(current_stream(message.tensor.device()));
  }
  std::lock_guard<std::mutex> lock(state.mutex);
  state.mailboxes[{rank_, dst, state.mailbox_tag(tag)}].push_back(std::move(message));
  state.changed.notify_all();
  return std::make_shared<DoneWork>();
}

std::shared_ptr<Work> InProcessCommunicator::irecv(at::Tensor& tensor, int src, int tag) {
  DUALPIPE_REQUIRE(src >= 0 && src < size() && src != rank_, "rank ", rank_, " cannot receive from rank ", src);
  DUALPIPE_REQUIRE(tag >= 0, "message tags must be >= 0, got ", tag);
  return std::make_shared<RecvWork>(hub_->state(), tensor, src, rank_, hub_->state().mailbox_tag(tag));
}

void InProcessCommunicator::barrier() {
  auto& state = hub_->state();
  std::unique_lock<std::mutex> lock(state.mutex);
  long generation = state.barrier_generation;
  if (++state.barrier_arrived == state.world_size) {
    state.barrier_arrived = 0;
    ++state.barrier_generation;
    state.changed.notify_all();
    return;
  }
  bool ok = state.changed.wait_for(lock, state.timeout, [&] {
    return state.barrier_generation != generation || !state.abort_reason.empty();
  });
  if (!state.abort_reason.empty())
    throw CommError(detail::concat("rank ", rank_, ": barrier aborted: ", state.abort_reason));
  if (!ok)
    throw CommError(detail::concat("rank ", rank_, ": barrier timed out after ", state.timeout.count(),
                                   " ms with ", state.barrier_arrived, " of ", state.world_size, " ranks arrived"));
}

}  // namespace dualpipe::comm
