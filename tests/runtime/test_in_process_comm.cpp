// The in-process communicator: tagged matching in any order, timeouts and aborts that name the peer.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <thread>

#include "dualpipe/comm/in_process_communicator.h"

namespace dualpipe::comm {
namespace {

TEST(InProcessCommunicator, MatchesByTagWhateverTheOrder) {
  auto hub = std::make_shared<InProcessHub>(2, std::chrono::seconds(5));
  InProcessCommunicator a(hub, 0), b(hub, 1);
  a.isend(torch::full({2}, 1.0), 1, 7);
  a.isend(torch::full({2}, 2.0), 1, 3);
  torch::Tensor x = torch::empty({2}), y = torch::empty({2});
  auto wy = b.irecv(y, 0, 3);
  auto wx = b.irecv(x, 0, 7);
  wy->wait(std::chrono::seconds(1));
  wx->wait(std::chrono::seconds(1));
  EXPECT_TRUE(torch::equal(x, torch::full({2}, 1.0)));
  EXPECT_TRUE(torch::equal(y, torch::full({2}, 2.0)));
  EXPECT_TRUE(a.matches_by_tag());  // so the pipeline posts its receives ahead on it
}

// In the single-tag mode, which stands for NCCL, messages match by order alone, and it says so.
TEST(InProcessCommunicator, OneTagMatchesByOrderAlone) {
  auto hub = std::make_shared<InProcessHub>(2, std::chrono::seconds(5), /*single_tag=*/true);
  InProcessCommunicator a(hub, 0), b(hub, 1);
  EXPECT_FALSE(a.matches_by_tag());
  a.isend(torch::full({2}, 1.0), 1, 7);
  a.isend(torch::full({2}, 2.0), 1, 3);
  torch::Tensor first = torch::empty({2}), second = torch::empty({2});
  b.irecv(first, 0, 3)->wait(std::chrono::seconds(1));
  b.irecv(second, 0, 7)->wait(std::chrono::seconds(1));
  EXPECT_TRUE(torch::equal(first, torch::full({2}, 1.0)));  // the first sent, whatever its tag
  EXPECT_TRUE(torch::equal(second, torch::full({2}, 2.0)));
}

TEST(InProcessCommunicator, TimeoutNamesThePeer) {
  auto hub = std::make_shared<InProcessHub>(3, std::chrono::seconds(5));
  InProcessCommunicator c(hub, 0);
  torch::Tensor x = torch::empty({1});
  auto w = c.irecv(x, 2, 0);
  try {
    w->wait(std::chrono::milliseconds(20));
    FAIL() << "no timeout";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("from rank 2"), std::string::npos) << e.what();
  }
}

TEST(InProcessCommunicator, AbortWakesWaiters) {
  auto hub = std::make_shared<InProcessHub>(2, std::chrono::seconds(30));
  InProcessCommunicator c(hub, 0);
  torch::Tensor x = torch::empty({1});
  auto w = c.irecv(x, 1, 0);
  std::thread killer([&] { hub->abort("rank 1 failed"); });
  EXPECT_THROW(w->wait(std::chrono::seconds(30)), CommError);
  killer.join();
}

TEST(InProcessCommunicator, Barrier) {
  auto hub = std::make_shared<InProcessHub>(3, std::chrono::seconds(5));
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      InProcessCommunicator c(hub, r);
      c.barrier();
      c.barrier();
    });
  for (auto& t : threads) t.join();
}

}  // namespace
}  // namespace dualpipe::comm
