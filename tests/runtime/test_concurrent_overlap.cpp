// ConcurrentOverlapStage's two ways of sharing a rank between the halves of an overlapped pair, against orders
// worked out by hand: taking turns, the backward starts, each half runs until it yields (after starting an exchange)
// and the halves never run at once; concurrently, they do run at once. Failures of either half reach the caller without a hang.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dualpipe/runtime/concurrent_overlap.h"

namespace dualpipe::runtime {
namespace {

// The parts the halves ran, in order, and the most halves ever running a part at once.
class PartLog {
 public:
  void part(const std::string& name) {
    const int now = ++running_;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      parts_.push_back(name);
      most_at_once_ = std::max(most_at_once_, now);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // long enough for another half to show up
    --running_;
  }
  std::vector<std::string> parts() const { return parts_; }
  int most_at_once() const { return most_at_once_; }

 private:
  std::mutex mutex_;
  std::atomic<int> running_{0};
  std::vector<std::string> parts_;
  int most_at_once_ = 0;
};

// A half made of parts with a yield after each but the last, as an MoE stage yields after starting each exchange.
std::function<void()> half(PartLog& log, const std::string& name, int parts) {
  return [&log, name, parts] {
    for (int i = 1; i <= parts; ++i) {
      log.part(name + std::to_string(i));
      if (i < parts) yield_overlap_turn();
    }
  };
}

std::shared_ptr<Stage> stage_running(std::function<void()> forward, OverlapMode mode) {
  auto inner = std::make_shared<ModuleStage>(std::make_shared<torch::nn::Module>(), [forward](const Tensors& x) {
    forward();
    return x;
  });
  return std::make_shared<ConcurrentOverlapStage>(inner, nullptr, mode);
}

using Parts = std::vector<std::string>;

TEST(ConcurrentOverlap, TakingTurnsTheHalvesAlternateAtEachYieldAndNeverRunAtOnce) {
  PartLog log;
  const Tensors in = {torch::ones({2})};
  const Tensors out = stage_running(half(log, "F", 3), OverlapMode::TakeTurns)
                          ->overlapped_forward_backward(in, BackwardHalf{half(log, "B", 2)});
  EXPECT_TRUE(torch::equal(out.at(0), in.at(0)));
  EXPECT_EQ(log.parts(), (Parts{"B1", "F1", "B2", "F2", "F3"}));
  EXPECT_EQ(log.most_at_once(), 1);
}

TEST(ConcurrentOverlap, TakingTurnsAHalfThatIsDoneLeavesTheOtherToRunToItsEnd) {
  PartLog log;
  stage_running(half(log, "F", 2), OverlapMode::TakeTurns)
      ->overlapped_forward_backward({}, BackwardHalf{half(log, "B", 4)});
  EXPECT_EQ(log.parts(), (Parts{"B1", "F1", "B2", "F2", "B3", "B4"}));
  EXPECT_EQ(log.most_at_once(), 1);
}

// A backward half whose parameter gradients come last (BackwardHalf::weight) hands the turn on between its input
// gradients and its parameter gradients, so the forward's part after its last exchange runs first and the parameter
// gradients, which exchange nothing, are left for the end.
TEST(ConcurrentOverlap, TakingTurnsTheWeightGradientsOfTheBackwardComeAfterTheForwardsNextPart) {
  PartLog log;
  BackwardHalf backward{half(log, "B", 2), [&log] { log.part("W"); }};
  stage_running(half(log, "F", 2), OverlapMode::TakeTurns)->overlapped_forward_backward({}, backward);
  EXPECT_EQ(log.parts(), (Parts{"B1", "F1", "B2", "F2", "W"}));
  EXPECT_EQ(log.most_at_once(), 1);
}

// The forward's exchange ends only once the backward has run its third part; the backward's own exchanges end at
// once. So after B2 the backward keeps the turn (its exchange ended first) and runs B3; at its next yield the
// forward's exchange has ended and the forward goes on.
TEST(ConcurrentOverlap, TakingTurnsTheHalfWhoseExchangeEndsFirstGoesOn) {
  PartLog log;
  std::atomic<bool> forward_exchange_ended{false};
  auto forward = [&] {
    log.part("F1");
    yield_overlap_turn([&] { return forward_exchange_ended.load(); });
    log.part("F2");
  };
  auto backward = [&] {
    log.part("B1");
    yield_overlap_turn([] { return true; });  // the forward has not started: it goes first
    log.part("B2");
    yield_overlap_turn([] { return true; });
    log.part("B3");
    forward_exchange_ended = true;
    yield_overlap_turn([] { return true; });
    log.part("B4");
  };
  stage_running(forward, OverlapMode::TakeTurns)->overlapped_forward_backward({}, BackwardHalf{backward});
  EXPECT_EQ(log.parts(), (Parts{"B1", "F1", "B2", "B3", "F2", "B4"}));
  EXPECT_EQ(log.most_at_once(), 1);
}

TEST(ConcurrentOverlap, OutsideAPairYieldingReturnsAtOnce) {
  yield_overlap_turn();  // no overlapped pair on this thread: must not block
  PartLog log;
  stage_running(half(log, "F", 2), OverlapMode::TakeTurns)->forward({});
  EXPECT_EQ(log.parts(), (Parts{"F1", "F2"}));
}

// Each half waits for the other to have started: only halves running at once get through (or the wait times out).
TEST(ConcurrentOverlap, ConcurrentHalvesRunAtOnce) {
  std::mutex mutex;
  std::condition_variable changed;
  int started = 0;
  bool all_met = true;
  auto meet = [&] {
    std::unique_lock<std::mutex> lock(mutex);
    ++started;
    changed.notify_all();
    all_met &= changed.wait_for(lock, std::chrono::seconds(10), [&] { return started == 2; });
  };
  stage_running(meet, OverlapMode::Concurrent)->overlapped_forward_backward({}, BackwardHalf{meet});
  EXPECT_TRUE(all_met);
}

TEST(ConcurrentOverlap, AFailingHalfHandsTheTurnOnAndItsErrorReachesTheCaller) {
  for (const bool forward_fails : {true, false}) {
    PartLog log;
    auto fail_after_one = [&log](const std::string& name) {
      return [&log, name] {
        log.part(name + "1");
        yield_overlap_turn();
        throw std::runtime_error(name + " failed");
      };
    };
    auto forward = forward_fails ? std::function<void()>(fail_after_one("F")) : half(log, "F", 3);
    auto backward = forward_fails ? half(log, "B", 3) : std::function<void()>(fail_after_one("B"));
    try {
      stage_running(forward, OverlapMode::TakeTurns)->overlapped_forward_backward({}, BackwardHalf{backward});
      ADD_FAILURE() << "no error";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), forward_fails ? "F failed" : "B failed");
    }
    // The half that did not fail ran all its parts.
    const Parts expected = forward_fails ? Parts{"B1", "F1", "B2", "B3"} : Parts{"B1", "F1", "F2", "F3"};
    EXPECT_EQ(log.parts(), expected);
  }
}

}  // namespace
}  // namespace dualpipe::runtime
