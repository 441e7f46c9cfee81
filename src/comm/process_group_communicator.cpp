#include "dualpipe/comm/process_group_communicator.h"

#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "dualpipe/comm/peer_monitor.h"
#include "direct_links.h"
#include "wait_error.h"

namespace dualpipe::comm {

using dualpipe::detail::concat;

namespace {

std::string exception_text(const std::exception_ptr& error) {
  try {
    if (error) std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "failed";
}

// Waits for a c10d work; a lost peer (monitor) aborts the wait. Returns the backend's error, empty on success.
std::string wait_c10d(const c10::intrusive_ptr<c10d::Work>& work, PeerMonitor* monitor,
                      std::chrono::milliseconds timeout) {
  std::optional<PeerMonitor::Guard> guard;
  if (monitor) guard.emplace(*monitor, [work] { work->abort(); });
  try {
    if (work->wait(timeout)) return {};
    return "aborted";
  } catch (const std::exception& e) {
    return e.what();
  }
}

// One transfer. A receive is waited on by the caller; a send by its destination's watcher thread, which
// records the outcome for wait() and is_completed().
class TransferWork : public Work {
 public:
  TransferWork(c10::intrusive_ptr<c10d::Work> work, at::Tensor tensor, PeerMonitor* monitor, int self, int peer,
               int tag, const char* what)
      : work_(std::move(work)), tensor_(std::move(tensor)), monitor_(monitor), self_(self), peer_(peer), tag_(tag),
        what_(what) {}

  std::string operation() const { return concat(what_, " rank ", peer_, " (tag ", tag_, ")"); }

  // The receive path, and the watcher's wait for a send.
  std::string wait_backend(std::chrono::milliseconds timeout) { return wait_c10d(work_, monitor_, timeout); }

  void abort_backend() { work_->abort(); }

  void wait(std::chrono::milliseconds timeout) override {
    if (watched_) {
      std::unique_lock<std::mutex> lock(mutex_);
      if (!done_.wait_for(lock, timeout, [&] { return finished_; }))
        throw wait_error(monitor_, self_, operation(), peer_, timeout, "Timed out");
      if (!error_.empty()) throw wait_error(monitor_, self_, operation(), peer_, timeout, error_);
      return;
    }
    if (finished_) return;
    std::string error = wait_backend(timeout);
    if (!error.empty()) throw wait_error(monitor_, self_, operation(), peer_, timeout, error);
    finished_ = true;
    if (deliver_to_.defined()) deliver_to_.copy_(tensor_);
    tensor_ = at::Tensor();
  }

  bool is_completed() override {
    if (!watched_) return finished_;
    std::lock_guard<std::mutex> lock(mutex_);
    return finished_;
  }

  // A receive that arrived in a host buffer (tensor) for a device tensor: copied there when waited on.
  void deliver_to(at::Tensor target) { deliver_to_ = std::move(target); }

  // Watcher side.
  void watch() { watched_ = true; }
  void finish(std::string error) {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = std::move(error);
    finished_ = true;
    tensor_ = at::Tensor();  // dropped on the watcher thread only after the transfer ended
    done_.notify_all();
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  at::Tensor tensor_;  // alive until the transfer completed
  at::Tensor deliver_to_;
  PeerMonitor* monitor_;
  int self_, peer_, tag_;
  const char* what_;
  bool watched_ = false;
  std::mutex mutex_;
  std::condition_variable done_;
  bool finished_ = false;
  std::string error_;
};

bool environment_flag(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::string(value) == "1";
}

// Waits, in posting order, on the sends to one destination (they complete in that order).
class SendWatcher {
 public:
  explicit SendWatcher(std::chrono::milliseconds timeout) : timeout_(timeout), thread_([this] { run(); }) {}
  ~SendWatcher() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      for (auto& w : queue_) w->abort_backend();
    }
    changed_.notify_all();
    thread_.join();
  }
  void add(std::shared_ptr<TransferWork> work) {
    work->watch();
    bool idle;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      idle = queue_.empty();  // otherwise the thread is waiting on an earlier send and comes back for this one
      queue_.push_back(std::move(work));
    }
    if (idle) changed_.notify_all();  // one wake-up fewer per send on a busy channel
  }

 private:
  void run() {
    for (;;) {
      std::shared_ptr<TransferWork> work;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        work = queue_.front();
      }
      std::string error = work->wait_backend(timeout_);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        queue_.pop_front();
      }
      work->finish(std::move(error));
    }
  }

  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::shared_ptr<TransferWork>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

bool single_tag_from_environment() {
  return environment_flag("DUALPIPE_SINGLE_TAG") || nccl_rules_from_environment();
}

bool nccl_rules_from_environment() { return environment_flag("DUALPIPE_NCCL_RULES"); }

struct ProcessGroupCommunicator::Impl {
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  ProcessGroupCommunicatorOptions options;
  std::shared_ptr<PeerMonitor> monitor;  // shared by the two channels of a DirectionalCommunicator
  std::map<int, std::unique_ptr<SendWatcher>> watchers;  // by destination, made on first use
  std::unique_ptr<DirectLinks> links;                    // null: point-to-point through the group
  int wire_tag(int tag) const { return options.single_tag ? 0 : tag; }
  // Gloo sends and receives bytes from host memory (its collectives stage device tensors themselves, its
  // point-to-point does not): a tensor on a GPU travels through a host copy. NCCL takes it where it is.
  bool through_host(const at::Tensor& tensor) const {
    return !tensor.is_cpu() && group->getBackend(tensor.device().type())->getBackendName() == "gloo";
  }
};

ProcessGroupCommunicator::ProcessGroupCommunicator(c10::intrusive_ptr<c10d::ProcessGroup> group,
                                                   ProcessGroupCommunicatorOptions options)
    : ProcessGroupCommunicator(std::move(group), options, nullptr) {}

ProcessGroupCommunicator::ProcessGroupCommunicator(c10::intrusive_ptr<c10d::ProcessGroup> group,
                                                   ProcessGroupCommunicatorOptions options,
                                                   std::shared_ptr<PeerMonitor> monitor)
    : impl_(new Impl) {
  DUALPIPE_REQUIRE(group, "ProcessGroupCommunicator needs a process group, got none");
  DUALPIPE_REQUIRE(options.timeout.count() > 0, "the communicator timeout must be positive, got ",
                   options.timeout.count(), " ms");
  impl_->group = std::move(group);
  impl_->options = options;
  impl_->monitor = std::move(monitor);
}

ProcessGroupCommunicator::~ProcessGroupCommunicator() {
  const bool failed = impl_->monitor && impl_->monitor->failure();
  impl_->watchers.clear();  // aborts and joins: no send outlives the communicator
  impl_->links.reset();     // closed before the peer monitor says goodbye
  impl_->monitor.reset();   // goodbye, or the rank this one leaves because of
  // After a failure a collective may still run on the group's worker thread, blocked on the lost peer until the
  // backend's own timeout, and destroying the group would join that thread: the process would linger. It is
  // ending anyway, so the group is left to the operating system.
  if (failed) (void)impl_->group.release();
}

int ProcessGroupCommunicator::rank() const { return impl_->group->getRank(); }
int ProcessGroupCommunicator::size() const { return impl_->group->getSize(); }
std::chrono::milliseconds ProcessGroupCommunicator::timeout() const { return impl_->options.timeout; }
// A group of one backend, Gloo: a group of several ("cpu:gloo,cuda:nccl") may carry a message over NCCL.
bool ProcessGroupCommunicator::matches_by_tag() const {
  return !impl_->options.single_tag && impl_->group->getBackendName() == "gloo";
}
const c10::intrusive_ptr<c10d::ProcessGroup>& ProcessGroupCommunicator::group() const { return impl_->group; }
PeerMonitor* ProcessGroupCommunicator::peer_monitor() const { return impl_->monitor.get(); }

void ProcessGroupCommunicator::use_direct_links(std::vector<int> sockets) {
  DUALPIPE_REQUIRE(static_cast<int>(sockets.size()) == size(), "direct links need a socket for each of the ",
                   size(), " ranks, got ", sockets.size());
  impl_->links = std::make_unique<DirectLinks>(std::move(sockets), rank(), peer_monitor(), timeout());
}

std::shared_ptr<Work> ProcessGroupCommunicator::isend(const at::Tensor& tensor, int dst, int tag) {
  DUALPIPE_REQUIRE(dst >= 0 && dst < size() && dst != rank(), "rank ", rank(), " cannot send to rank ", dst);
  if (impl_->links && tensor.is_cpu()) return impl_->links->isend(tensor.contiguous(), dst, impl_->wire_tag(tag));
  std::vector<at::Tensor> tensors{impl_->through_host(tensor) ? tensor.to(at::kCPU) : tensor.contiguous()};
  c10::intrusive_ptr<c10d::Work> work;
  PeerMonitor* monitor = impl_->monitor.get();
  try {  // Gloo throws at once when the peer's connection is already broken
    work = impl_->group->send(tensors, dst, impl_->wire_tag(tag));
  } catch (const std::exception& e) {
    throw wait_error(monitor, rank(), concat("send to rank ", dst, " (tag ", tag, ")"), dst, timeout(), e.what());
  }
  auto transfer = std::make_shared<TransferWork>(std::move(work), tensors[0], monitor, rank(), dst, tag, "send to");
  auto& watcher = impl_->watchers[dst];
  if (!watcher) watcher = std::make_unique<SendWatcher>(timeout());
  watcher->add(transfer);
  return transfer;
}

std::shared_ptr<Work> ProcessGroupCommunicator::irecv(at::Tensor& tensor, int src, int tag) {
  DUALPIPE_REQUIRE(src >= 0 && src < size() && src != rank(), "rank ", rank(), " cannot receive from rank ", src);
  DUALPIPE_REQUIRE(tensor.is_contiguous(), "receive buffers must be contiguous");
  if (impl_->links && tensor.is_cpu()) return impl_->links->irecv(tensor, src, impl_->wire_tag(tag));
  const bool through_host = impl_->through_host(tensor);
  std::vector<at::Tensor> tensors{through_host ? at::empty(tensor.sizes(), tensor.options().device(at::kCPU)) : tensor};
  c10::intrusive_ptr<c10d::Work> work;
  PeerMonitor* monitor = impl_->monitor.get();
  try {
    work = impl_->group->recv(tensors, src, impl_->wire_tag(tag));
  } catch (const std::exception& e) {
    throw wait_error(monitor, rank(), concat("receive from rank ", src, " (tag ", tag, ")"), src, timeout(),
                     e.what());
  }
  auto transfer = std::make_shared<TransferWork>(std::move(work), tensors[0], monitor, rank(), src, tag, "receive from");
  if (through_host) transfer->deliver_to(tensor);
  return transfer;
}

// c10d runs the barrier on the group's worker thread; waiting for it in slices lets a lost peer end the wait.
void ProcessGroupCommunicator::barrier() {
  using Clock = std::chrono::steady_clock;
  const auto limit = timeout();
  const auto deadline = Clock::now() + limit;
  PeerMonitor* monitor = impl_->monitor.get();
  c10::intrusive_ptr<c10d::Work> work;
  try {
    // On the CPU: over Gloo in every group, those of NCCL included (backend.h), so that NCCL never guesses a
    // device for it.
    c10d::BarrierOptions options;
    options.device = at::Device(at::kCPU);
    work = impl_->group->barrier(options);
  } catch (const std::exception& e) {
    throw wait_error(monitor, rank(), "barrier", -1, limit, e.what());
  }
  for (;;) {
    if (monitor && monitor->failure()) throw wait_error(monitor, rank(), "barrier", -1, limit, "");
    try {
      work->wait(std::chrono::milliseconds(100));
      return;
    } catch (const std::exception&) {
      // A slice that ran out throws "Operation timed out!" even when the barrier completes a moment later, before
      // the check below: only the work's own state says whether it failed. (Reading the slice's exception as the
      // barrier's failure reported a successful barrier as "timed out" on a loaded machine, about one run in 14
      // of bench_schedule_fidelity at R=8, and the peer monitor then stopped every rank.)
      if (work->isCompleted()) {
        if (work->isSuccess()) return;
        throw wait_error(monitor, rank(), "barrier", -1, limit, exception_text(work->exception()));
      }
      if (Clock::now() >= deadline) throw wait_error(monitor, rank(), "barrier", -1, limit, "Timed out");
    }
  }
}

}  // namespace dualpipe::comm
