#include "dualpipe/comm/gloo_communicator.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdlib>
#include <limits>

namespace dualpipe::comm {

struct GlooCommunicator::Impl {
  GlooOptions options;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
};

namespace {

// Wraps a c10d Work; turns Gloo's exceptions and timeouts into CommError naming the peer.
class GlooWork : public Work {
 public:
  GlooWork(c10::intrusive_ptr<c10d::Work> work, at::Tensor tensor, int self, int peer, int tag, const char* what)
      : work_(std::move(work)), tensor_(std::move(tensor)), self_(self), peer_(peer), tag_(tag), what_(what) {}

  void wait(std::chrono::milliseconds timeout) override {
    if (done_) return;
    try {
      work_->wait(timeout);
    } catch (const std::exception& e) {
      throw CommError(detail::concat("rank ", self_, ": ", what_, " rank ", peer_, " (tag ", tag_,
                                     ") failed or timed out after ", timeout.count(), " ms: ", e.what()));
    }
    done_ = true;
    tensor_ = at::Tensor();  // the buffer can go now
  }
  bool is_completed() override { return done_ || work_->isCompleted(); }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  at::Tensor tensor_;  // kept alive until the transfer completed
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
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw CommError(detail::concat("rank ", options.rank, ": Gloo rendezvous at ", options.master_addr, ":",
                                   options.master_port, " for ", options.world_size, " ranks failed: ", e.what()));
  }
}

GlooCommunicator::~GlooCommunicator() = default;

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
  auto work = impl_->group->send(tensors, dst, tag);
  return std::make_shared<GlooWork>(std::move(work), tensors[0], rank(), dst, tag, "send to");
}

std::shared_ptr<Work> GlooCommunicator::irecv(at::Tensor& tensor, int src, int tag) {
  DUALPIPE_REQUIRE(src >= 0 && src < size() && src != rank(), "rank ", rank(), " cannot receive from rank ", src);
  DUALPIPE_REQUIRE(tensor.is_contiguous(), "receive buffers must be contiguous");
  std::vector<at::Tensor> tensors{tensor};
  auto work = impl_->group->recv(tensors, src, tag);
  return std::make_shared<GlooWork>(std::move(work), tensor, rank(), src, tag, "receive from");
}

void GlooCommunicator::barrier() {
  try {
    impl_->group->barrier()->wait(impl_->options.timeout);
  } catch (const std::exception& e) {
    throw CommError(detail::concat("rank ", rank(), ": barrier failed or timed out: ", e.what()));
  }
}

}  // namespace dualpipe::comm
