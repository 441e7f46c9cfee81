// A traced run's measured step is its slowest rank's median ProfilerStep: `plan --from-kineto` reads its costs from
// the steps that make that median, so that a slow step's actions do not raise them. Traces laid out by hand, four
// steps of one 1F1B run each stretched by its own factor; the answers follow from the factors.
#include <gtest/gtest.h>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/sim/kineto_plan.h"
#include "dualpipe/sim/kineto_report.h"
#include "sim/kineto_trace_text.h"

namespace dualpipe {
namespace {

struct StepRegion {
  std::string name;
  double start, duration;
};

// 1F1B, R = 2, M = 2, F = 10 and B = 20 on both stages, as test_kineto_shared_run.cpp lays it out: 100 us a step.
const std::vector<std::vector<StepRegion>> kOneStep = {
    {{"forward stage 0", 0, 10}, {"forward stage 0", 10, 10},
     {"backward stage 0", 45, 20}, {"backward stage 0", 80, 20}},
    {{"forward stage 1", 12, 10}, {"backward stage 1", 22, 20},
     {"forward stage 1", 43, 10}, {"backward stage 1", 53, 20}}};

// The step traced once per factor, each time stretched by it, with a ProfilerStep around each and 10 us between.
KinetoRanks traced(const std::vector<double>& stretch) {
  KinetoRanks ranks;
  for (std::size_t r = 0; r < kOneStep.size(); ++r) {
    std::vector<std::string> events;
    std::vector<double> steps;
    double at = 0;
    for (std::size_t k = 0; k < stretch.size(); ++k) {
      const double s = stretch[k];
      events.push_back(test::kineto_event("user_annotation", "ProfilerStep#" + std::to_string(k + 1), 1, 1, at,
                                          100 * s));
      for (const StepRegion& region : kOneStep[r])
        events.push_back(test::kineto_event("user_annotation", region.name, 1, 1, at + s * region.start,
                                            s * region.duration));
      steps.push_back(100 * s);
      at += 100 * s + 10;
    }
    KinetoRankSummary rank;
    rank.source = "rank" + std::to_string(r) + ".json";
    rank.rank = static_cast<int>(r);
    rank.schedule = format_text(make_1f1b({2, 2}));
    rank.summary = summarize_kineto(parse_kineto_trace(test::kineto_trace(events), rank.source));
    std::sort(steps.begin(), steps.end());
    const std::size_t n = steps.size();
    rank.step = n % 2 ? steps[n / 2] : (steps[n / 2 - 1] + steps[n / 2]) / 2;
    ranks.ranks.push_back(std::move(rank));
  }
  return ranks;
}

// Steps of 100, 103.125, 200 and 101.5625 us (factors exact in binary, so that an action ends where the next
// starts): the median, 102.34375, is made by steps 3 and 1, so F is 10 x 1.0234375 and B 20 x 1.0234375 where the
// means over every step would give 10 x 1.26171875.
TEST(MedianSteps, CostsAreReadFromTheStepsThatMakeTheSlowestRanksMedian) {
  const KinetoRun run = read_kineto_run(traced({1, 1.03125, 2, 1.015625}), KinetoCostNames{});
  EXPECT_EQ(run.costs.steps_read, (std::vector<int>{1, 3}));
  EXPECT_EQ(run.costs.steps_traced, 4);
  EXPECT_DOUBLE_EQ(run.measured_step, 102.34375);
  EXPECT_NEAR(run.costs.costs.forward, 10.234375, 1e-9);
  EXPECT_NEAR(run.costs.costs.backward, 20.46875, 1e-9);
  // The waits too: comm 4 and gap 0.25 a step unstretched (test_kineto_shared_run.cpp).
  EXPECT_NEAR(run.costs.costs.comm, 4 * 1.0234375, 1e-9);
  EXPECT_NEAR(run.costs.costs.gap, 0.25 * 1.0234375, 1e-9);
  // Each action drawn at one of the two steps' factors of its unstretched time (their spread), comm and gap at
  // their mean:
  // the step, 98.75 unstretched, within those bounds.
  EXPECT_GE(run.simulated_step, 98.75 * 1.015625 - 1e-9);
  EXPECT_LE(run.simulated_step, 98.75 * 1.03125 + 1e-9);
  EXPECT_NE(kineto_costs_text(run.costs).find("read from traced steps 1 and 3 of 0-3: the two that make the slowest "
                                               "rank's median step"),
            std::string::npos);
}

TEST(MedianSteps, AnOddNumberOfStepsReadsTheMiddleOne) {
  const KinetoRun run = read_kineto_run(traced({1.25, 1.125, 1.1875}), KinetoCostNames{});
  EXPECT_EQ(run.costs.steps_read, (std::vector<int>{2}));
  EXPECT_NEAR(run.costs.costs.forward, 11.875, 1e-9);
  EXPECT_NE(kineto_costs_text(run.costs).find("read from traced step 2 of 0-2: the one that makes"),
            std::string::npos);
}

// Factors that are not exact in binary: in step 3, rank 0's first forward's end (its start plus its duration) lands
// a rounding error after the second's start, which must still read as the next action for its waits to be read.
TEST(MedianSteps, AnActionStartingARoundingErrorBeforeTheLastOnesEndFollowsIt) {
  const KinetoRun run = read_kineto_run(traced({1.00, 1.02, 2.00, 1.01}), KinetoCostNames{});
  EXPECT_EQ(run.costs.steps_read, (std::vector<int>{1, 3}));
  EXPECT_NE(kineto_costs_text(run.costs).find("(6 waits in 2 steps)"), std::string::npos);
  EXPECT_NEAR(run.costs.costs.comm, 4 * 1.015, 1e-9);
}

// Without a middle to choose (two steps), or without one step numbering for every rank, every step is read: F is the
// mean over all of them.
TEST(MedianSteps, FewerThanThreeStepsOrRanksThatTracedDifferentNumbersAreReadWhole) {
  const KinetoRun two = read_kineto_run(traced({1, 2}), KinetoCostNames{});
  EXPECT_TRUE(two.costs.steps_read.empty());
  EXPECT_EQ(two.costs.steps_traced, 2);
  EXPECT_NEAR(two.costs.costs.forward, 15, 1e-9);
  EXPECT_EQ(kineto_costs_text(two.costs).find("read from traced step"), std::string::npos);

  KinetoRanks uneven = traced({1, 1.125, 1.25});
  uneven.ranks[1] = traced({1, 1.125, 1.25, 1.5}).ranks[1];
  const KinetoRun whole = read_kineto_run(uneven, KinetoCostNames{});
  EXPECT_TRUE(whole.costs.steps_read.empty());
  EXPECT_EQ(whole.costs.steps_traced, 0);
  // stage 0: 10 x 1, 1.125, 1.25 (mean 11.25); stage 1: 10 x 1, 1.125, 1.25, 1.5 (mean 12.1875); F their mean.
  EXPECT_NEAR(whole.costs.costs.forward, (11.25 + 12.1875) / 2, 1e-9);
}

}  // namespace
}  // namespace dualpipe
