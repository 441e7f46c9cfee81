// ProcessGroupCommunicator::barrier() waits for c10d's barrier work in 100 ms slices (so that a lost peer can end
// the wait). A slice that runs out throws even when the barrier completes a moment later; reading that as the
// barrier's failure once stopped a whole bench run on a loaded machine (issue 8, item 6). These tests hand the
// communicator a process group whose barrier work behaves exactly that way, deterministically.
#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>
#include <string>

#include "dualpipe/comm/process_group_communicator.h"

namespace dualpipe::comm {
namespace {

enum class Outcome { CompletesAsTheSliceEnds, FailsAsTheSliceEnds, NeverCompletes };

class ScriptedBarrierWork : public c10d::Work {
 public:
  explicit ScriptedBarrierWork(Outcome outcome) : outcome_(outcome) {}
  bool wait(std::chrono::milliseconds timeout) override {
    if (outcome_ == Outcome::NeverCompletes) std::this_thread::sleep_for(timeout);
    throw std::runtime_error("Operation timed out!");  // what c10d's Work::wait says when a slice runs out
  }
  bool isCompleted() override { return outcome_ != Outcome::NeverCompletes; }
  bool isSuccess() const override { return outcome_ == Outcome::CompletesAsTheSliceEnds; }
  std::exception_ptr exception() const override {
    return std::make_exception_ptr(std::runtime_error("Connection reset by peer [10.0.0.2]:4242"));
  }

 private:
  Outcome outcome_;
};

class ScriptedGroup : public c10d::ProcessGroup {
 public:
  explicit ScriptedGroup(Outcome outcome) : ProcessGroup(0, 2), outcome_(outcome) {}
  const std::string getBackendName() const override { return "scripted"; }
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions&) override {
    return c10::make_intrusive<ScriptedBarrierWork>(outcome_);
  }

 private:
  Outcome outcome_;
};

ProcessGroupCommunicator communicator(Outcome outcome) {
  ProcessGroupCommunicatorOptions options;
  options.timeout = std::chrono::milliseconds(300);
  return ProcessGroupCommunicator(c10::make_intrusive<ScriptedGroup>(outcome), options);
}

TEST(ProcessGroupBarrier, CompletingJustAfterAWaitSliceEndsIsSuccess) {
  EXPECT_NO_THROW(communicator(Outcome::CompletesAsTheSliceEnds).barrier());
}

// The message of the CommError the barrier throws, or "passed".
std::string barrier_error(Outcome outcome) {
  try {
    communicator(outcome).barrier();
  } catch (const CommError& e) {
    return e.what();
  }
  return "passed";
}

TEST(ProcessGroupBarrier, AFailedBarrierReportsItsOwnError) {
  const std::string error = barrier_error(Outcome::FailsAsTheSliceEnds);
  EXPECT_NE(error.find("Connection reset by peer"), std::string::npos) << error;
  EXPECT_EQ(error.find("timed out"), std::string::npos) << error;
}

TEST(ProcessGroupBarrier, ABarrierThatNeverCompletesTimesOut) {
  const std::string error = barrier_error(Outcome::NeverCompletes);
  EXPECT_NE(error.find("rank 0: barrier: timed out after 0.3 s"), std::string::npos) << error;
}

}  // namespace
}  // namespace dualpipe::comm
