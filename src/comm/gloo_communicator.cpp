#include "dualpipe/comm/gloo_communicator.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <signal.h>

#include <cstdlib>
#include <limits>
#include <optional>

#include "peer_monitor.h"

namespace dualpipe::comm {

struct GlooCommunicator::Impl {
  GlooOptions options;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  std::unique_ptr<internal::PeerMonitor> monitor;
};

namespace {

using internal::PeerFailure;
using internal::PeerMonitor;

std::string seconds_text(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return dualpipe::detail::concat(d.count() / 1000, " s");
  return dualpipe::detail::concat(static_cast<double>(d.count()) / 1000.0, " s");
}

// The error of a wait that did not complete. The monitor's lost peer comes first (it names the root cause even
// when the wait was on a live neighbour); otherwise Gloo's failure is worded with the peer it was about.
CommError wait_error(PeerMonitor& monitor, int self, const std::string& operation, int peer,
                     std::chrono::milliseconds timeout, const std::string& gloo_error) {
  std::optional<PeerFailure> failure = monitor.failure();
  if (!failure && !gloo_error.empty()) {
    if (gloo_error.find("imed out") != std::string::npos) {
      failure = monitor.silent_peer();
      std::string waited = dualpipe::detail::concat("timed out after ", seconds_text(timeout));
      if (failure) {
        failure->reason = waited + "; " + failure->reason;
      } else {
        failure = PeerFailure{peer, peer >= 0 ? dualpipe::detail::concat("rank ", peer, " did not answer: ", waited)
                                              : waited};
      }
    } else {
      // Gloo saw a connection break, maybe a neighbour's that is leaving because of another rank: give the
      // monitor a moment to learn which.
      failure = monitor.await_failure(std::chrono::milliseconds(500));
      if (!failure)
        failure = PeerFailure{peer, peer >= 0 ? dualpipe::detail::concat("peer rank ", peer,
                                                                         " closed the connection or failed (",
                                                                         gloo_error, ")")
                                              : dualpipe::detail::concat("failed (", gloo_error, ")")};
    }
    monitor.report(*failure);  // other waits end too, and this rank's departure passes the blame on
  }
  if (!failure) failure = PeerFailure{peer, "aborted"};
  return CommError(dualpipe::detail::concat("rank ", self, ": ", operation, ": ", failure->reason), failure->rank,
                   failure->reason);
}

// Wraps a c10d send or receive; a wait ends when the transfer completes, Gloo fails it, the timeout passes, or
// the peer monitor aborts it because some rank was lost.
class GlooWork : public Work {
 public:
  GlooWork(c10::intrusive_ptr<c10d::Work> work, at::Tensor tensor, PeerMonitor& monitor, int self, int peer, int tag,
           const char* what)
      : work_(std::move(work)), tensor_(std::move(tensor)), monitor_(monitor), self_(self), peer_(peer), tag_(tag),
        what_(what) {}

  void wait(std::chrono::milliseconds timeout) override {
    if (done_) return;
    bool completed = false;
    std::string gloo_error;
    {
      PeerMonitor::Guard guard(monitor_, [work = work_] { work->abort(); });
      try {
        completed = work_->wait(timeout);
      } catch (const std::exception& e) {
        gloo_error = e.what();
      }
    }
    if (!completed)
      throw wait_error(monitor_, self_, dualpipe::detail::concat(what_, " rank ", peer_, " (tag ", tag_, ")"), peer_,
                       timeout, gloo_error.empty() && !monitor_.failure() ? "aborted" : gloo_error);
    done_ = true;
    tensor_ = at::Tensor();  // the buffer can go now
  }
  bool is_completed() override { return done_ || work_->isCompleted(); }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  at::Tensor tensor_;  // kept alive until the transfer completed
  PeerMonitor& monitor_;
  int self_, peer_, tag_;
  const char* what_;
  bool done_ = false;
};

int parse_int_env(const char* name, int min_value, int max_value) {
  const char* value = std::getenv(name);
  DUALPIPE_REQUIRE(value != nullptr && *value != '\0', "environment variable ", name,
                   " is not set (launch with torchrun-style MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE)");
  char* end = nullptr;
  long parsed = std::strtol(value, &end, 10);
  DUALPIPE_REQUIRE(end != value && *end == '\0' && parsed >= min_value && parsed <= max_value, "environment variable ",
                   name, "='", value, "' is not an integer in [", min_value, ", ", max_value, "]");
  return static_cast<int>(parsed);
}

}  // namespace

GlooCommunicator::GlooCommunicator(const GlooOptions& options) : impl_(new Impl) {
  DUALPIPE_REQUIRE(options.world_size >= 1, "world size must be >= 1, got ", options.world_size);
  DUALPIPE_REQUIRE(options.rank >= 0 && options.rank < options.world_size, "rank ", options.rank,
                   " is outside [0, ", options.world_size, ")");
  DUALPIPE_REQUIRE(options.master_port > 0 && options.master_port < 65536, "master port ", options.master_port,
                   " is not a TCP port");
  DUALPIPE_REQUIRE(!options.master_addr.empty(), "master address is empty");
  impl_->options = options;
  // Gloo writes to its sockets without MSG_NOSIGNAL: a write to a peer that just died would kill this process
  // with SIGPIPE before it could report which rank was lost. Ignored, the write fails with EPIPE instead, which
  // the waits turn into a CommError. (Only the default disposition is changed; a handler the program installed
  // stays.)
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(options.master_port);
  store_options.isServer = options.rank == 0;
  store_options.numWorkers = static_cast<std::size_t>(options.world_size);
  store_options.waitWorkers = true;
  store_options.timeout = options.timeout;
  try {
    impl_->store = c10::make_intrusive<c10d::TCPStore>(options.master_addr, store_options);
    auto group_options = c10d::ProcessGroupGloo::Options::create(options.timeout);
    std::string interface = options.interface;
    if (interface.empty() && std::getenv("GLOO_SOCKET_IFNAME")) interface = std::getenv("GLOO_SOCKET_IFNAME");
    group_options->devices.push_back(interface.empty()
                                         ? c10d::ProcessGroupGloo::createDefaultDevice()
                                         : c10d::ProcessGroupGloo::createDeviceForInterface(interface));
    impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, options.rank, options.world_size,
                                                               group_options);
    impl_->monitor = std::make_unique<internal::PeerMonitor>(*impl_->store, options.master_addr, options.rank,
                                                           options.world_size, options.timeout);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw CommError(detail::concat("rank ", options.rank, ": Gloo rendezvous at ", options.master_addr, ":",
                                   options.master_port, " for ", options.world_size, " ranks failed: ", e.what()));
  }
}

GlooCommunicator::~GlooCommunicator() {
  bool failed = impl_->monitor && impl_->monitor->failure();
  impl_->monitor.reset();  // goodbye, or the rank this one leaves because of
  // After a failure a collective may still run on the group's worker thread, blocked on the lost peer until
  // Gloo's own timeout, and destroying the group would join that thread: the process would linger. It is
  // ending anyway, so the group is left to the operating system.
  if (failed) (void)impl_->group.release();
}

GlooOptions GlooCommunicator::options_from_environment() {
  GlooOptions options;
  const char* addr = std::getenv("MASTER_ADDR");
  DUALPIPE_REQUIRE(addr != nullptr && *addr != '\0', "environment variable MASTER_ADDR is not set ",
                   "(launch with torchrun-style MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE)");
  options.master_addr = addr;
  options.master_port = parse_int_env("MASTER_PORT", 1, 65535);
  options.world_size = parse_int_env("WORLD_SIZE", 1, std::numeric_limits<int>::max());
  options.rank = parse_int_env("RANK", 0, options.world_size - 1);
  return options;
}

std::shared_ptr<GlooCommunicator> GlooCommunicator::from_environment(std::chrono::milliseconds timeout) {
  GlooOptions options = options_from_environment();
  options.timeout = timeout;
  return std::make_shared<GlooCommunicator>(options);
}

int GlooCommunicator::rank() const { return impl_->options.rank; }
int GlooCommunicator::size() const { return impl_->options.world_size; }
std::chrono::milliseconds GlooCommunicator::timeout() const { return impl_->options.timeout; }

std::shared_ptr<Work> GlooCommunicator::isend(const at::Tensor& tensor, int dst, int tag) {
  DUALPIPE_REQUIRE(dst >= 0 && dst < size() && dst != rank(), "rank ", rank(), " cannot send to rank ", dst);
  std::vector<at::Tensor> tensors{tensor.contiguous()};
  c10::intrusive_ptr<c10d::Work> work;
  try {  // Gloo throws at once when the peer's connection is already broken
    work = impl_->group->send(tensors, dst, tag);
  } catch (const std::exception& e) {
    throw wait_error(*impl_->monitor, rank(), dualpipe::detail::concat("send to rank ", dst, " (tag ", tag, ")"), dst,
                     impl_->options.timeout, e.what());
  }
  return std::make_shared<GlooWork>(std::move(work), tensors[0], *impl_->monitor, rank(), dst, tag, "send to");
}

std::shared_ptr<Work> GlooCommunicator::irecv(at::Tensor& tensor, int src, int tag) {
  DUALPIPE_REQUIRE(src >= 0 && src < size() && src != rank(), "rank ", rank(), " cannot receive from rank ", src);
  DUALPIPE_REQUIRE(tensor.is_contiguous(), "receive buffers must be contiguous");
  std::vector<at::Tensor> tensors{tensor};
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = impl_->group->recv(tensors, src, tag);
  } catch (const std::exception& e) {
    throw wait_error(*impl_->monitor, rank(),
                     dualpipe::detail::concat("receive from rank ", src, " (tag ", tag, ")"), src,
                     impl_->options.timeout, e.what());
  }
  return std::make_shared<GlooWork>(std::move(work), tensor, *impl_->monitor, rank(), src, tag, "receive from");
}

// c10d runs the barrier on the group's worker thread; waiting for it in slices lets a lost peer end the wait.
void GlooCommunicator::barrier() {
  using Clock = std::chrono::steady_clock;
  const auto timeout = impl_->options.timeout;
  const auto deadline = Clock::now() + timeout;
  auto& monitor = *impl_->monitor;
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = impl_->group->barrier();
  } catch (const std::exception& e) {
    throw wait_error(monitor, rank(), "barrier", -1, timeout, e.what());
  }
  for (;;) {
    if (monitor.failure()) throw wait_error(monitor, rank(), "barrier", -1, timeout, "");
    try {
      work->wait(std::chrono::milliseconds(100));
      return;
    } catch (const std::exception& e) {
      if (work->isCompleted()) throw wait_error(monitor, rank(), "barrier", -1, timeout, e.what());
      if (Clock::now() >= deadline) throw wait_error(monitor, rank(), "barrier", -1, timeout, "Timed out");
    }
  }
}

}  // namespace dualpipe::comm
