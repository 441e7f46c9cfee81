#include "dualpipe/comm/gloo_communicator.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <limits>
#include <optional>
#include <thread>

#include "dualpipe/comm/backend.h"
#include "dualpipe/comm/launch_environment.h"
#include "dualpipe/comm/network_interface.h"
#include "dualpipe/comm/peer_monitor.h"
#include "dualpipe/comm/socket_mesh.h"

namespace dualpipe::comm {

namespace {

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// The process claiming `rank` in the store, as "pid P on host H".
std::string this_process() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return detail::concat("pid ", getpid(), " on host ", host);
}

std::string text_of(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }

// Every rank claims its rank and announces the world size it was started with, then waits for the others. On
// timeout the error names the ranks that never arrived; a rank started with another WORLD_SIZE, and a rank that
// two processes claim (the same RANK given twice), are named at once.
void wait_for_every_rank(c10d::Store& store, const GlooOptions& options) {
  const auto key = [](int rank) { return "dualpipe/arrived/" + std::to_string(rank); };
  const std::string claims = "dualpipe/claims/" + std::to_string(options.rank);
  const auto claimant = [&](std::int64_t n) { return detail::concat(claims, "/", n); };
  const std::int64_t my_claim = store.add(claims, 1);
  const std::string me = this_process();
  store.set(claimant(my_claim), std::vector<uint8_t>(me.begin(), me.end()));
  const std::string size = std::to_string(options.world_size);
  store.set(key(options.rank), std::vector<uint8_t>(size.begin(), size.end()));
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  std::vector<int> missing;
  while (true) {
    if (store.add(claims, 0) > 1) {
      const std::int64_t other = my_claim == 1 ? 2 : 1;
      const std::string them = store.check({claimant(other)}) ? text_of(store.get(claimant(other))) : "another process";
      throw CommError(detail::concat("rank ", options.rank, ": two processes claim rank ", options.rank, " (", me,
                                     " and ", them, "): give every process its own RANK"));
    }
    missing.clear();
    for (int r = 0; r < options.world_size; ++r) {
      if (!store.check({key(r)})) {
        missing.push_back(r);
        continue;
      }
      const std::string their_size = text_of(store.get(key(r)));
      if (their_size != size)
        throw CommError(detail::concat("rank ", options.rank, ": rank ", r, " was started with WORLD_SIZE ",
                                       their_size, ", this rank with ", size,
                                       ": start every rank with the same world size"));
    }
    if (missing.empty()) return;
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::string names;
  for (int r : missing) names += (names.empty() ? "" : ", ") + std::to_string(r);
  throw CommError(detail::concat("rank ", options.rank, ": ", missing.size() == 1 ? "rank " : "ranks ", names,
                                 " of ", options.world_size, " never arrived at the rendezvous at ",
                                 options.master_addr, ":", options.master_port, " within ",
                                 options.timeout.count() / 1000.0, " s"),
                  missing.front());
}

}  // namespace

// What the constructor builds before the base class can take it.
struct GlooCommunicator::Connection {
  c10::intrusive_ptr<c10d::Store> store;
  std::string interface;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  ProcessGroupCommunicatorOptions options;
  std::unique_ptr<PeerMonitor> monitor;
  std::vector<int> link_sockets;  // the direct links' mesh, empty without them
};

GlooCommunicator::Connection GlooCommunicator::connect(const GlooOptions& options) {
  DUALPIPE_REQUIRE(options.world_size >= 1, "world size must be >= 1, got ", options.world_size);
  DUALPIPE_REQUIRE(options.rank >= 0 && options.rank < options.world_size, "rank ", options.rank,
                   " is outside [0, ", options.world_size, ")");
  DUALPIPE_REQUIRE(options.master_port > 0 && options.master_port < 65536, "master port ", options.master_port,
                   " is not a TCP port");
  DUALPIPE_REQUIRE(!options.master_addr.empty(), "master address is empty");
  // Gloo writes to its sockets without MSG_NOSIGNAL: a write to a peer that just died would kill this process
  // with SIGPIPE before it could report which rank was lost. Ignored, the write fails with EPIPE instead, which
  // the waits turn into a CommError. (Only the default disposition is changed; a handler the program installed
  // stays.)
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(options.master_port);
  store_options.isServer = options.rank == 0 && !options.store_hosted_by_agent;
  store_options.numWorkers = static_cast<std::size_t>(options.world_size);
  // Our own rendezvous below waits for the ranks, so that a timeout can name the ones that never came.
  store_options.waitWorkers = false;
  store_options.timeout = options.timeout;
  GlooCommunicator::Connection connection;
  connection.options.timeout = options.timeout;
  connection.options.single_tag = options.single_tag;
  try {
    c10::intrusive_ptr<c10d::TCPStore> tcp_store;
    try {
      tcp_store = c10::make_intrusive<c10d::TCPStore>(options.master_addr, store_options);
    } catch (const std::exception& e) {
      throw CommError(detail::concat("rank ", options.rank, ": ",
                                     options.rank == 0 ? "cannot serve the rendezvous store on port "
                                                       : "cannot reach rank 0's rendezvous store at ",
                                     options.master_addr, ":", options.master_port, " within ",
                                     options.timeout.count() / 1000.0, " s (", first_line(e.what()), ")",
                                     options.rank == 0 ? "" : ": is rank 0 running, and MASTER_ADDR/MASTER_PORT right?"));
    }
    // A store that outlives the ranks (torchrun's agent hosts it across restarts) holds the keys of earlier
    // attempts: each attempt works under its own prefix, as torch.distributed's env:// rendezvous does.
    c10::intrusive_ptr<c10d::Store> store = tcp_store;
    if (options.store_hosted_by_agent)
      store = c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + std::to_string(options.restart_count),
                                                     tcp_store);
    wait_for_every_rank(*store, options);
    std::string interface = options.interface;
    if (interface.empty() && std::getenv("GLOO_SOCKET_IFNAME")) interface = std::getenv("GLOO_SOCKET_IFNAME");
    // Else the interface that reaches rank 0: peers on other machines can reach it too, unlike the host name's
    // address (127.0.0.1 inside a network namespace, or on many a laptop).
    if (interface.empty()) interface = interface_routing_to(options.master_addr);
    ProcessGroupSpec spec;
    spec.timeout = options.timeout;
    spec.interface = interface;
    connection.group = make_process_group(store, options.rank, options.world_size, spec);
    connection.store = store;
    connection.interface = interface;
    if (options.direct_links && options.world_size > 1) {
      // Each communicator of a process meets its peers' under its own keys: the n-th made by every rank.
      const auto made = store->add(detail::concat("dualpipe/direct_links/made_by/", options.rank), 1);
      connection.link_sockets =
          connect_socket_mesh(*store, detail::concat("dualpipe/direct_links/", made), options.master_addr,
                              options.rank, options.world_size, options.timeout, "direct links");
    }
    if (options.peer_monitor)
      connection.monitor = std::make_unique<PeerMonitor>(*store, options.master_addr, options.rank,
                                                                   options.world_size, options.timeout);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw CommError(detail::concat("rank ", options.rank, ": Gloo rendezvous at ", options.master_addr, ":",
                                   options.master_port, " for ", options.world_size, " ranks failed: ", e.what()));
  }
  return connection;
}

GlooCommunicator::GlooCommunicator(const GlooOptions& options) : GlooCommunicator(connect(options)) {}

GlooCommunicator::GlooCommunicator(Connection connection)
    : ProcessGroupCommunicator(std::move(connection.group), connection.options, std::move(connection.monitor)),
      store_(std::move(connection.store)),
      interface_(std::move(connection.interface)) {
  if (!connection.link_sockets.empty()) use_direct_links(std::move(connection.link_sockets));
}

GlooCommunicator::~GlooCommunicator() = default;

bool direct_links_from_environment() {
  const char* value = std::getenv("DUALPIPE_DIRECT_LINKS");
  return value == nullptr || std::string(value) != "0";
}

GlooOptions GlooCommunicator::options_from_environment() {
  const LaunchEnvironment launch = read_launch_environment();
  GlooOptions options;
  options.master_addr = launch.master_addr;
  options.master_port = launch.master_port;
  options.world_size = launch.world_size;
  options.rank = launch.rank;
  options.store_hosted_by_agent = launch.store_hosted_by_agent;
  options.restart_count = launch.restart_count;
  const char* monitor = std::getenv("DUALPIPE_PEER_MONITOR");
  options.peer_monitor = monitor == nullptr || std::string(monitor) != "0";
  return options;
}

std::shared_ptr<GlooCommunicator> GlooCommunicator::from_environment(std::chrono::milliseconds timeout) {
  GlooOptions options = options_from_environment();
  options.timeout = timeout;
  return std::make_shared<GlooCommunicator>(options);
}



}  // namespace dualpipe::comm
