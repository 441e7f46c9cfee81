// A rank that fails and lives on (Python's DualPipe, whose program may catch the error) announces the failure
// through its peer monitor: every peer's wait in flight ends at once with that rank named, its reason, and whether
// it refused its input, instead of waiting until the timeout. Ranks are threads over Gloo groups and one in-memory
// store; the reference is what the announcing rank said.
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include "dualpipe/comm/backend.h"
#include "dualpipe/comm/peer_monitor.h"
#include "dualpipe/comm/process_group_communicator.h"

namespace {

using namespace dualpipe::comm;
using Clock = std::chrono::steady_clock;

constexpr auto kTimeout = std::chrono::seconds(60);

struct Outcome {
  std::optional<CommError> error;
  double seconds = 0;
};

// Three ranks; rank 1 announces `failure` once ranks 0 and 2 wait on a receive from it that never comes.
std::vector<Outcome> announce_while_peers_wait(const PeerFailure& failure) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<Outcome> outcomes(3);
  std::atomic<int> waiting{0};
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      at::set_num_threads(1);
      ProcessGroupSpec spec;
      spec.interface = "lo";
      auto group = make_process_group(c10::make_intrusive<c10d::PrefixStore>("group", store), r, 3, spec);
      c10d::PrefixStore monitor_store("monitor", store);
      auto monitor = std::make_shared<PeerMonitor>(monitor_store, "127.0.0.1", r, 3, kTimeout);
      ProcessGroupCommunicatorOptions options;
      options.timeout = kTimeout;
      ProcessGroupCommunicator communicator(group, options, monitor);
      const auto start = Clock::now();
      if (r == 1) {
        while (waiting < 2) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the peers are inside their waits
        monitor->announce(failure);
      } else {
        at::Tensor buffer = torch::zeros({4});
        auto receive = communicator.irecv(buffer, 1, 7);
        ++waiting;
        try {
          receive->wait(kTimeout);
        } catch (const CommError& e) {
          outcomes[static_cast<std::size_t>(r)].error = e;
        }
      }
      outcomes[static_cast<std::size_t>(r)].seconds = std::chrono::duration<double>(Clock::now() - start).count();
      // Rank 1 stays until its peers have their errors: they learn from its announcement, not from its exit.
      ++waiting;
      while (waiting < 5) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    });
  }
  for (std::thread& t : ranks) t.join();
  return outcomes;
}

TEST(PeerMonitor, AnInvalidInputAnnouncedByOneRankEndsItsPeersWaitsAsAnInvalidInput) {
  const std::vector<Outcome> outcomes =
      announce_while_peers_wait({1, "rank 1: the loss of micro-batch 3 does not require grad", true});
  for (int r : {0, 2}) {
    const Outcome& o = outcomes[static_cast<std::size_t>(r)];
    ASSERT_TRUE(o.error.has_value()) << "rank " << r << "'s receive from the failed rank completed";
    EXPECT_EQ(o.error->rank(), 1);
    EXPECT_TRUE(o.error->invalid_input());
    EXPECT_EQ(o.error->reason(), "rank 1: the loss of micro-batch 3 does not require grad");
    EXPECT_NE(std::string(o.error->what()).find("receive from rank 1"), std::string::npos) << o.error->what();
    // Well inside the 60-second timeout: the announcement ended the wait, not the clock.
    EXPECT_LT(o.seconds, 30.0);
  }
}

TEST(PeerMonitor, AnyOtherFailureAnnouncedReachesThePeersAsACommunicationError) {
  const std::vector<Outcome> outcomes = announce_while_peers_wait({1, "rank 1 was interrupted (KeyboardInterrupt)"});
  for (int r : {0, 2}) {
    const Outcome& o = outcomes[static_cast<std::size_t>(r)];
    ASSERT_TRUE(o.error.has_value());
    EXPECT_FALSE(o.error->invalid_input());
    EXPECT_EQ(o.error->reason(), "rank 1 was interrupted (KeyboardInterrupt)");
  }
}

TEST(PeerMonitor, OneWithoutPeersEndsItsOwnRanksWaits) {
  PeerMonitor monitor(0);
  std::atomic<int> aborted{0};
  {
    PeerMonitor::Guard guard(monitor, [&] { ++aborted; });
    monitor.announce({0, "rank 0 was interrupted (KeyboardInterrupt)"});
    EXPECT_EQ(aborted, 1);
  }
  PeerMonitor::Guard later(monitor, [&] { ++aborted; });  // a wait started after the failure ends at once
  EXPECT_EQ(aborted, 2);
  ASSERT_TRUE(monitor.failure().has_value());
  EXPECT_EQ(monitor.failure()->reason, "rank 0 was interrupted (KeyboardInterrupt)");
}

}  // namespace
