// The exposed all-to-all time of a step (train/expert_timeline.h), on hand-placed spans whose answer is worked
// out by hand below: an instant is exposed when some exchange is under way and no thread computes.
#include <gtest/gtest.h>

#include <thread>

#include "train/expert_timeline.h"

namespace dualpipe::train {
namespace {

using Time = ExpertTimeline::Time;

TEST(ExpertTimeline, ExposedTimeIsExchangeTimeWhenNoThreadComputes) {
  const Time t0 = std::chrono::steady_clock::now();
  const auto at = [t0](int ms) { return t0 + std::chrono::milliseconds(ms); };
  ExpertTimeline timeline;  // made on this thread: the executor's
  const std::thread::id main = std::this_thread::get_id();
  std::thread::id backward;

  // A whole action [0, 10] on the main thread, waiting in a dispatch over [2, 4]: 2 ms exposed.
  timeline.exchange("dispatch", at(2), at(2), at(4));
  // An overlapped pair: the forward half on the main thread [20, 30], the backward half on another [20, 40].
  // The forward half's dispatch [22, 26] is hidden while the backward half computes, except over [24, 25], when
  // the backward half waits too (1 ms). The backward half's combine [35, 38] comes after the forward half ended,
  // so nothing covers it (3 ms).
  runtime::OverlapHalves halves;
  halves.forward_thread = main;
  halves.forward_start = at(20), halves.forward_end = at(30);
  timeline.exchange("dispatch", at(22), at(22), at(26));
  std::thread other([&] {
    backward = std::this_thread::get_id();
    timeline.exchange("dispatch backward", at(24), at(24), at(25));
    timeline.exchange("combine backward", at(35), at(35), at(38));
  });
  other.join();
  halves.backward_thread = backward;
  halves.backward_start = at(20), halves.backward_end = at(40);
  timeline.halves(halves);

  const ExpertTimeline::StepTotals totals = timeline.finish_step({{main, at(0), at(10)}}, 7);
  EXPECT_NEAR(totals.all_to_all_ms, 2 + 4 + 1 + 3, 1e-9);
  EXPECT_NEAR(totals.exposed_ms, 2 + 1 + 3, 1e-9);

  // The step's exchanges are kept for the trace, with their step and thread.
  ASSERT_EQ(timeline.exchanges().size(), 4u);
  for (const ExpertTimeline::Exchange& e : timeline.exchanges()) {
    EXPECT_EQ(e.step, 7) << e.what;
    EXPECT_EQ(e.backward_thread, e.what.find("backward") != std::string::npos) << e.what;
  }
}

TEST(ExpertTimeline, WithoutOverlapEveryExchangeIsExposedAndDiscardForgetsEvaluation) {
  const Time t0 = std::chrono::steady_clock::now();
  const auto at = [t0](int ms) { return t0 + std::chrono::milliseconds(ms); };
  ExpertTimeline timeline;
  timeline.exchange("dispatch", at(0), at(0), at(50));  // an evaluation forward's, before the step
  timeline.discard();
  // Sequential forward [0, 10] and backward [10, 30] on one thread, with their exchanges inside.
  timeline.exchange("dispatch", at(3), at(3), at(5));
  timeline.exchange("combine", at(6), at(6), at(9));
  timeline.exchange("combine backward", at(12), at(12), at(16));
  const std::thread::id main = std::this_thread::get_id();
  const ExpertTimeline::StepTotals totals = timeline.finish_step({{main, at(0), at(10)}, {main, at(10), at(30)}}, 0);
  EXPECT_NEAR(totals.all_to_all_ms, 9, 1e-9);
  EXPECT_NEAR(totals.exposed_ms, 9, 1e-9);
  EXPECT_EQ(timeline.exchanges().size(), 3u);
}

// The phases (runtime/phases.h): one thread runs the whole pair [0, 20], starting an exchange and computing the other
// half's phase before it waits. Only the waits expose: the dispatch started at 2 is waited for over [8, 10] (2 ms);
// the combine's gradient, started at 4 and over before the wait at 12, hides all of its 8 ms.
TEST(ExpertTimeline, PhasesExposeOnlyTheTimeTheyWait) {
  const Time t0 = std::chrono::steady_clock::now();
  const auto at = [t0](int ms) { return t0 + std::chrono::milliseconds(ms); };
  ExpertTimeline timeline;
  timeline.exchange("dispatch", at(2), at(8), at(10));
  timeline.exchange("combine backward", at(4), at(12), at(12));
  const ExpertTimeline::StepTotals totals = timeline.finish_step({{std::this_thread::get_id(), at(0), at(20)}}, 0);
  EXPECT_NEAR(totals.all_to_all_ms, 8 + 8, 1e-9);
  EXPECT_NEAR(totals.exposed_ms, 2, 1e-9);
  // The backward's exchange on the second track: on one thread, it overlaps the forward's.
  ASSERT_EQ(timeline.exchanges().size(), 2u);
  EXPECT_FALSE(timeline.exchanges()[0].backward_thread);
  EXPECT_TRUE(timeline.exchanges()[1].backward_thread);
}

}  // namespace
}  // namespace dualpipe::train
