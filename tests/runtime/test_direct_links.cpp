// GlooCommunicator's direct links (src/comm/direct_links.h), two ranks in one process over a socket pair: messages
// matched by peer and tag in posting order whichever comes first, large messages both ways at once (each side's
// send only moves while a thread of the other side waits), two threads waiting on one rank, and failures that
// name the peer; and a ProcessGroupCommunicator over a program's own group given them (Python's DualPipe). The
// processes' runs over Gloo (test_gloo_processes.cpp, test_failures.cpp) use them too.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/torch.h>

#include <cstring>
#include <memory>
#include <thread>

#include "comm/direct_links.h"
#include "dualpipe/comm/backend.h"
#include "dualpipe/comm/process_group_communicator.h"

namespace dualpipe::comm {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Ranks 0 and 1's sockets by peer, joined by a socket pair.
std::pair<std::vector<int>, std::vector<int>> socket_pair() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) throw std::runtime_error("socketpair");
  return {{-1, fds[0]}, {fds[1], -1}};
}

struct Pair {
  std::unique_ptr<DirectLinks> zero, one;
  Pair() {
    auto [sockets0, sockets1] = socket_pair();
    zero = std::make_unique<DirectLinks>(sockets0, 0, nullptr, seconds(10));
    one = std::make_unique<DirectLinks>(sockets1, 1, nullptr, seconds(10));
  }
};

std::string error_of(Work& work, milliseconds limit) {
  try {
    work.wait(limit);
  } catch (const CommError& e) {
    return e.what();
  }
  return "";
}

TEST(DirectLinks, MatchByTagInPostingOrderWhetherSentBeforeOrAfterTheReceive) {
  Pair pair;
  // Sent before any receive is posted: they wait aside.
  auto sent = {pair.zero->isend(torch::full({3}, 1.0), 1, 7), pair.zero->isend(torch::full({2}, 2.0), 1, 3),
               pair.zero->isend(torch::full({3}, 3.0), 1, 7)};
  torch::Tensor first = torch::empty({3}), second = torch::empty({3}), other = torch::empty({2});
  auto r3 = pair.one->irecv(other, 0, 3);
  auto r7a = pair.one->irecv(first, 0, 7);
  auto r7b = pair.one->irecv(second, 0, 7);
  // Posted before its message is sent.
  torch::Tensor late = torch::empty({4}, torch::kInt64);
  auto r9 = pair.one->irecv(late, 0, 9);
  pair.zero->isend(torch::arange(4), 1, 9)->wait(seconds(5));
  for (auto* w : {&r7b, &r9, &r3, &r7a}) (*w)->wait(seconds(5));
  for (const auto& w : sent) w->wait(seconds(5));
  EXPECT_TRUE(torch::equal(first, torch::full({3}, 1.0)));
  EXPECT_TRUE(torch::equal(second, torch::full({3}, 3.0)));
  EXPECT_TRUE(torch::equal(other, torch::full({2}, 2.0)));
  EXPECT_TRUE(torch::equal(late, torch::arange(4)));
}

TEST(DirectLinks, LargeMessagesCrossBothWaysAtOnce) {
  Pair pair;
  // 32 MiB each way: far more than the sockets' buffers, so each send finishes only while the other side reads.
  const torch::Tensor from_zero = torch::randn({8 << 20}), from_one = torch::randn({8 << 20});
  torch::Tensor at_zero = torch::empty_like(from_one), at_one = torch::empty_like(from_zero);
  auto side = [](DirectLinks& links, int peer, const torch::Tensor& out, torch::Tensor& in) {
    auto send = links.isend(out, peer, 1);
    auto receive = links.irecv(in, peer, 1);
    receive->wait(seconds(30));
    send->wait(seconds(30));
  };
  std::thread zero([&] { side(*pair.zero, 1, from_zero, at_zero); });
  side(*pair.one, 0, from_one, at_one);
  zero.join();
  EXPECT_TRUE(torch::equal(at_one, from_zero));
  EXPECT_TRUE(torch::equal(at_zero, from_one));
}

TEST(DirectLinks, TwoThreadsOfOneRankWaitAtOnce) {
  Pair pair;
  torch::Tensor a = torch::empty({2}), b = torch::empty({2});
  auto ra = pair.one->irecv(a, 0, 1);
  auto rb = pair.one->irecv(b, 0, 2);
  std::thread first([&] { ra->wait(seconds(10)); });
  std::thread second([&] { rb->wait(seconds(10)); });
  std::this_thread::sleep_for(milliseconds(50));  // both waiting: one polls, the other waits for its passes
  pair.zero->isend(torch::full({2}, 2.0), 1, 2)->wait(seconds(5));
  std::this_thread::sleep_for(milliseconds(50));
  pair.zero->isend(torch::full({2}, 1.0), 1, 1)->wait(seconds(5));
  first.join();
  second.join();
  EXPECT_TRUE(torch::equal(a, torch::full({2}, 1.0)));
  EXPECT_TRUE(torch::equal(b, torch::full({2}, 2.0)));
}

TEST(DirectLinks, EmptyMessagesArriveAndAWrongSizeIsNamed) {
  Pair pair;
  torch::Tensor empty = torch::empty({0}), small = torch::empty({2});
  pair.zero->isend(torch::empty({0}), 1, 4);
  pair.zero->isend(torch::ones({5}), 1, 5);
  pair.one->irecv(empty, 0, 4)->wait(seconds(5));
  auto wrong = pair.one->irecv(small, 0, 5);
  const std::string error = error_of(*wrong, seconds(5));
  EXPECT_NE(error.find("rank 1: receive from rank 0 (tag 5)"), std::string::npos) << error;
  EXPECT_NE(error.find("the message has 20 bytes, the receive buffer 8"), std::string::npos) << error;
}

TEST(DirectLinks, APeerThatClosesIsNamedAndLaterTransfersFailAtOnce) {
  Pair pair;
  torch::Tensor x = torch::empty({1});
  auto waiting = pair.zero->irecv(x, 1, 0);
  pair.one.reset();
  const std::string error = error_of(*waiting, seconds(5));
  EXPECT_NE(error.find("rank 0: receive from rank 1 (tag 0): peer rank 1 closed the connection or failed"),
            std::string::npos)
      << error;
  EXPECT_THROW(pair.zero->isend(torch::ones({1}), 1, 0), CommError);
}

TEST(DirectLinks, AWaitOutlivingTheLinksFailsWithoutTouchingTheirSockets) {
  Pair pair;
  torch::Tensor x = torch::empty({1});
  auto waiting = pair.zero->irecv(x, 1, 0);
  pair.zero.reset();
  const std::string error = error_of(*waiting, seconds(5));
  EXPECT_NE(error.find("the communicator was destroyed"), std::string::npos) << error;
}

TEST(DirectLinks, ATimeoutNamesThePeer) {
  Pair pair;
  torch::Tensor x = torch::empty({1});
  auto waiting = pair.zero->irecv(x, 1, 0);
  const std::string error = error_of(*waiting, milliseconds(50));
  EXPECT_NE(error.find("rank 1 did not answer: timed out after 0.05 s"), std::string::npos) << error;
}

TEST(DirectLinks, PeersOutsideTheWorldAreRefused) {
  Pair pair;
  torch::Tensor x = torch::empty({1});
  EXPECT_THROW(pair.zero->isend(x, 0, 0), InvalidArgument);
  EXPECT_THROW(pair.zero->irecv(x, 2, 0), InvalidArgument);
}

// A ProcessGroupCommunicator over the program's own group, given links: its CPU tensors cross on them (the bytes are
// read from the peer's end of the socket: a 16-byte header, then the tensor's), a wrong socket count is refused, and
// barriers stay on the group.
TEST(DirectLinks, AProgramsOwnGroupSendsItsCpuTensorsOnThemWhenGiven) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  auto [sockets0, sockets1] = socket_pair();
  const torch::Tensor sent = torch::arange(6.0);
  std::vector<char> bytes(16 + 6 * sizeof(float));
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      ProcessGroupSpec spec;
      spec.interface = "lo";
      spec.timeout = seconds(20);
      ProcessGroupCommunicator communicator(make_process_group(store, r, 2, spec), {seconds(20)});
      if (r == 0) {
        EXPECT_THROW(communicator.use_direct_links({-1}), InvalidArgument);  // one socket for two ranks
        communicator.use_direct_links(sockets0);
        try {
          communicator.isend(sent, 1, 4)->wait(seconds(5));
        } catch (const std::exception& e) {
          ADD_FAILURE() << e.what();
        }
      } else {  // rank 1 reads its end of the socket itself, for at most 5 s
        const timeval limit{5, 0};
        ::setsockopt(sockets1[0], SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
        for (size_t read = 0; read < bytes.size();) {
          const ssize_t n = ::recv(sockets1[0], bytes.data() + read, bytes.size() - read, 0);
          if (n <= 0) {
            ADD_FAILURE() << "nothing came on the socket after " << read << " bytes";
            break;
          }
          read += static_cast<size_t>(n);
        }
        ::close(sockets1[0]);
      }
      communicator.barrier();
    });
  for (auto& t : ranks) t.join();
  EXPECT_EQ(std::memcmp(bytes.data() + 16, sent.data_ptr<float>(), 6 * sizeof(float)), 0);
}

}  // namespace
}  // namespace dualpipe::comm
