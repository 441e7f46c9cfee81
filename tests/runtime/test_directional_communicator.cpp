// DirectionalCommunicator: messages to a higher rank go over the upward channel, to a lower one over the downward
// channel, receives over the channel their sender used, and connect() meets each peer in (lower, higher) rank order.
// The channels here are recorders; the expected calls are worked out by hand from the rules in
// comm/directional_communicator.h. The trainer's use of it over Gloo under NCCL's rules (DUALPIPE_NCCL_RULES=1) is
// tested by OrderOnly.TrainsBitForBitAsWithTags, every schedule kind in three layouts.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "dualpipe/comm/directional_communicator.h"
#include "dualpipe/util/error.h"

namespace {

using dualpipe::comm::Communicator;
using dualpipe::comm::DirectionalCommunicator;
using dualpipe::comm::Work;

struct DoneWork : Work {
  void wait(std::chrono::milliseconds) override {}
  bool is_completed() override { return true; }
};

// Records "<channel> send|recv <peer>" into a shared log.
class Recorder : public Communicator {
 public:
  Recorder(std::string name, int rank, int size, std::vector<std::string>& log)
      : name_(std::move(name)), rank_(rank), size_(size), log_(log) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::shared_ptr<Work> isend(const at::Tensor&, int dst, int) override {
    log_.push_back(name_ + " send " + std::to_string(dst));
    return std::make_shared<DoneWork>();
  }
  std::shared_ptr<Work> irecv(at::Tensor&, int src, int) override {
    log_.push_back(name_ + " recv " + std::to_string(src));
    return std::make_shared<DoneWork>();
  }
  void barrier() override { log_.push_back(name_ + " barrier"); }
  std::chrono::milliseconds timeout() const override { return std::chrono::seconds(1); }

 private:
  std::string name_;
  int rank_, size_;
  std::vector<std::string>& log_;
};

DirectionalCommunicator channels_of(int rank, int size, std::vector<std::string>& log) {
  return DirectionalCommunicator(std::make_shared<Recorder>("up", rank, size, log),
                                 std::make_shared<Recorder>("down", rank, size, log));
}

TEST(DirectionalCommunicator, SendsGoByTheDirectionOfTheirDestinationAndReceivesByTheirSender) {
  std::vector<std::string> log;
  DirectionalCommunicator c = channels_of(1, 3, log);
  at::Tensor t = torch::zeros({1});
  c.isend(t, 2, 7);
  c.isend(t, 0, 7);
  c.irecv(t, 0, 7);
  c.irecv(t, 2, 7);
  c.barrier();
  EXPECT_EQ(log, (std::vector<std::string>{"up send 2", "down send 0", "up recv 0", "down recv 2", "up barrier"}));
  EXPECT_EQ(c.rank(), 1);
  EXPECT_EQ(c.size(), 3);
}

TEST(DirectionalCommunicator, ConnectMeetsPeersInLowerHigherOrderOneMessageEachWay) {
  std::vector<std::string> log;
  DirectionalCommunicator c = channels_of(2, 5, log);
  // Unsorted and repeated: pairs (0,2), (1,2), (2,4) in that order. In each, the lower rank sends upward first,
  // then the higher one sends downward.
  c.connect({4, 0, 1, 4}, at::TensorOptions());
  EXPECT_EQ(log, (std::vector<std::string>{"up recv 0", "down send 0", "up recv 1", "down send 1", "up send 4",
                                           "down recv 4"}));
}

TEST(DirectionalCommunicator, RefusesChannelsOfDifferentRanksAndPeersOutsideThem) {
  std::vector<std::string> log;
  EXPECT_THROW(DirectionalCommunicator(std::make_shared<Recorder>("up", 0, 2, log),
                                       std::make_shared<Recorder>("down", 1, 2, log)),
               dualpipe::InvalidArgument);
  DirectionalCommunicator c = channels_of(0, 2, log);
  EXPECT_THROW(c.connect({0}, at::TensorOptions()), dualpipe::InvalidArgument);
  EXPECT_THROW(c.connect({2}, at::TensorOptions()), dualpipe::InvalidArgument);
}

}  // namespace
