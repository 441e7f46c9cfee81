// The straggler watch (run/straggler.h) and the re-plan (run/replan.h), on figures written by hand.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "dualpipe/run/replan.h"
#include "dualpipe/run/straggler.h"
#include "dualpipe/schedule/generators.h"
#include "dualpipe/util/error.h"
#include "test_helpers.h"

namespace dualpipe::run {
namespace {

// Four ranks running F and B at 1 ms a layer, rank `slow` at `factor` times that.
std::vector<RankKindTimes> step_of(int slow, double factor) {
  std::vector<RankKindTimes> ranks(4, RankKindTimes{1, 2, -1, -1, -1});
  if (slow >= 0) ranks[slow] = {factor, 2 * factor, -1, -1, -1};
  return ranks;
}

TEST(StragglerWatch, NamesARankSlowForTheGivenStepsInARowOnce) {
  StragglerWatch watch(1.15, 5, {});
  for (int step = 1; step <= 4; ++step) EXPECT_FALSE(watch.observe(step, step_of(-1, 1)));
  for (int step = 5; step <= 8; ++step) EXPECT_FALSE(watch.observe(step, step_of(2, 1.5))) << step;
  const std::optional<Straggler> found = watch.observe(9, step_of(2, 1.5));  // the fifth slow step in a row
  ASSERT_TRUE(found);
  EXPECT_EQ(found->rank, 2);
  EXPECT_EQ(found->since_step, 5);
  EXPECT_NEAR(found->slowdown, 1.5, 1e-12);
  EXPECT_NEAR(found->per_kind[0], 1.5, 1e-12);
  EXPECT_NEAR(found->per_kind[1], 1.5, 1e-12);
  EXPECT_NEAR(watch.measured_speed()[2], 1 / 1.5, 1e-12);
  EXPECT_FALSE(watch.observe(10, step_of(2, 1.5)));  // once
}

TEST(StragglerWatch, OneSlowStepIsNoise) {
  StragglerWatch watch(1.15, 5, {});
  for (int step = 1; step <= 40; ++step)
    EXPECT_FALSE(watch.observe(step, step_of(step % 4 == 0 ? 1 : -1, 3.0))) << step;  // every fourth step
}

TEST(StragglerWatch, ASlowRankTheCutWasMadeForIsNormal) {
  StragglerWatch watch(1.15, 2, {1, 1, 1 / 1.5, 1});
  for (int step = 1; step <= 10; ++step) EXPECT_FALSE(watch.observe(step, step_of(2, 1.5)));
  EXPECT_NEAR(watch.measured_speed()[2], 1 / 1.5, 1e-12);
  // Slower still: 1.8 / 1.5 = 1.2 over what it was planned for.
  EXPECT_FALSE(watch.observe(11, step_of(2, 1.8)));
  EXPECT_TRUE(watch.observe(12, step_of(2, 1.8)));
}

TEST(SlowRank, ParsesRankFactorAndStepAndRefusesTheRest) {
  const SlowRank slow = parse_slow_rank("2=1.5@5", 4);
  EXPECT_EQ(slow.rank, 2);
  EXPECT_DOUBLE_EQ(slow.factor, 1.5);
  EXPECT_EQ(slow.from_step, 5);
  EXPECT_EQ(parse_slow_rank("0=2", 4).from_step, 1);
  for (const auto& [bad, rule] : std::vector<std::pair<std::string, std::string>>{
           {"4=1.5", "RANK must be a pipeline rank, 0 to 3"}, {"2", "must be RANK=FACTOR"},
           {"2=0.5", "FACTOR must be between 1 and 100"}, {"2=1.5@0", "STEP must be a step number"},
           {"x=1.5", "RANK 'x' is not a number"}, {"1.5=2", "RANK must be a pipeline rank"}}) {
    const std::string error = test::error_text([&] { parse_slow_rank(bad, 4); });
    EXPECT_NE(error.find("--emulate-slow-rank '" + bad + "': " + rule), std::string::npos) << error;
  }
}

// The typical times of each kind come from different actions: on a busy machine the median W can exceed the
// median B (found by four training runs sharing two cores: "cost W is part of B, so 0 <= W <= B, got W=6.66 with
// B=4.79" ended a run at its straggler report). W stays within B, and a re-plan from such figures goes through.
TEST(Replan, LayerCostKeepsWWithinBWhateverTheMediansSay) {
  const LayerCost noisy = layer_cost_of({1.0, 4.79, 1.2, 6.66, 0});  // F, B, I, W, FB
  EXPECT_DOUBLE_EQ(noisy.forward, 1.0);
  EXPECT_DOUBLE_EQ(noisy.backward, 4.79);
  EXPECT_DOUBLE_EQ(noisy.weight, 4.79);
  const LayerCost split = layer_cost_of({1.0, 0, 1.2, 0.8, 0});  // only I and W ran: B = I + W
  EXPECT_DOUBLE_EQ(split.backward, 2.0);
  EXPECT_DOUBLE_EQ(split.weight, 0.8);
  const LayerCost pairs = layer_cost_of({0, 0, 0, 0, 1.5});  // only F&B pairs: F from them, B = 2F, W = B/2
  EXPECT_DOUBLE_EQ(pairs.forward, 1.5);
  EXPECT_DOUBLE_EQ(pairs.backward, 3.0);
  EXPECT_DOUBLE_EQ(pairs.weight, 1.5);
  TrainConfig c;
  c.pipeline.schedule = "dualpipe", c.parallel.pp = 4, c.pipeline.microbatches = 16, c.model.layers = 32;
  EXPECT_NO_THROW(replan_for(c, {8, 8, 8, 8}, {1, 1, 0.5, 1}, noisy));
}

// A rank at 2/3 speed under DualPipe: the re-plan (whichever schedule it picks) holds fewer layers on that rank than
// an even cut would, and its simulated step is at least 15% shorter than DualPipe's even cut at the same speeds.
TEST(Replan, MovesLayersOffTheSlowRankAndPredictsTheGain) {
  TrainConfig c;
  c.pipeline.schedule = "dualpipe", c.parallel.pp = 4, c.pipeline.microbatches = 16, c.model.layers = 32;
  const LayerCost layer{1, 2, 1, 0};
  const Replan r = replan_for(c, {8, 8, 8, 8}, {1, 1, 2.0 / 3, 1}, layer);
  EXPECT_GE(r.gain(), 0.15) << r.schedule << " " << format_cut(r.layers_per_stage);
  ScheduleOptions o;
  o.num_ranks = 4, o.num_microbatches = 16, o.stages_per_rank = r.stages_per_rank;
  const Placement p = make_schedule(r.schedule, o).placement;
  ASSERT_EQ(static_cast<int>(r.layers_per_stage.size()), p.num_stages());
  int on_slow_rank = 0, stages_of_slow_rank = 0;
  for (int s = 0; s < p.num_stages(); ++s)
    for (const int rank : p.ranks_holding(s))
      if (rank == 2) on_slow_rank += r.layers_per_stage[s], ++stages_of_slow_rank;
  EXPECT_LT(on_slow_rank, 32 * stages_of_slow_rank / p.num_stages()) << r.schedule << " "
                                                                      << format_cut(r.layers_per_stage);
  TrainConfig applied = c;
  apply_replan(r, applied);
  EXPECT_EQ(applied.model.layers_per_stage, r.layers_per_stage);
  EXPECT_EQ(applied.stragglers.rank_speed, (std::vector<double>{1, 1, 0.667, 1}));  // as the report prints them
}

// A re-plan from DualPipeV (8 stages) to a schedule of 4 keeps each emulated layer's cost: a stage's costs double.
TEST(Replan, EmulatedCostsFollowTheStageCount) {
  TrainConfig c;
  c.pipeline.schedule = "dualpipev", c.parallel.pp = 4, c.pipeline.microbatches = 8, c.model.layers = 16;
  c.device.emulate = "F=20,B=40,W=20";
  Replan r;
  r.schedule = "1f1b", r.layers_per_stage = {5, 4, 3, 4}, r.rank_speed = {1, 1, 1, 1};
  apply_replan(r, c);
  EXPECT_EQ(c.device.emulate, "F=40,B=80,W=40");
  EXPECT_EQ(c.pipeline.schedule, "1f1b");
}

TEST(Replan, TheRequestRoundTripsThroughItsFile) {
  const std::string dir = testing::TempDir();
  Replan r;
  r.schedule = "zbv", r.layers_per_stage = {3, 2, 2, 3, 3, 2, 2, 3}, r.rank_speed = {1, 0.5, 1, 1};
  r.current_ms = 10, r.predicted_ms = 8;
  const std::string job = start_replan_job();  // as the launcher, before it starts the ranks
  EXPECT_NE(start_replan_job(), job);           // each start of the ranks names a job of its own
  const std::string ranks_job = std::getenv(kReplanJobVariable);
  write_replan_request(dir, 7, r);
  EXPECT_EQ(replan_request_job(dir), ranks_job);
  const std::optional<ReplanRequest> back = read_replan_request(dir);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->job, ranks_job);
  EXPECT_EQ(back->step, 7);
  EXPECT_EQ(back->replan.schedule, "zbv");
  EXPECT_EQ(back->replan.layers_per_stage, r.layers_per_stage);
  EXPECT_EQ(back->replan.rank_speed, r.rank_speed);
  EXPECT_DOUBLE_EQ(back->replan.gain(), 0.2);
  std::ofstream(replan_request_path(dir)) << R"({"step": 7, "schedule": "zbv"})";  // no job: not the ranks'
  EXPECT_EQ(replan_request_job(dir), "");
  std::ofstream(replan_request_path(dir)) << "{";
  EXPECT_EQ(replan_request_job(dir), "");
  std::remove(replan_request_path(dir).c_str());
  EXPECT_FALSE(read_replan_request(dir));
  EXPECT_FALSE(replan_request_job(dir));
}

// Issue 75: the launcher restarts the ranks with what this file says. A file that is not what the ranks wrote (a
// corrupted or edited one) is named with its rule; the nlohmann exception of a broken one escaped as exit 1.
TEST(Replan, ARequestFileThatTheRanksDidNotWriteIsNamedWithItsRule) {
  const std::string dir = testing::TempDir() + "replan_bad";
  ASSERT_EQ(std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str()), 0);
  const std::string good = R"("schedule": "zbv", "stages_per_rank": 0, "layers_per_stage": [2, 2], "rank_speed": [1],
                               "current_ms": 10, "predicted_ms": 8)";
  const std::vector<std::pair<std::string, std::string>> files = {
      {"{\"step\": 3, " + good.substr(0, 40), "not a re-plan request: [json.exception.parse_error"},
      {"[1, 2]", "not a re-plan request: [json.exception.type_error"},
      {"{\"step\": \"3\", " + good + "}", "step \"3\" is not a whole number from 0 to 10^9"},
      // fuzz_replan: a layer count past int's range was converted with undefined behaviour.
      {"{\"step\": 3, " + std::string(good).replace(good.find("[2, 2]"), 6, "[2, 399999999999999999999]") + "}",
       "layers_per_stage holds 4e+20 is not a whole number"},
      {"{\"step\": 3, " + std::string(good).replace(good.find("[2, 2]"), 6, "[2, 1.5]") + "}",
       "layers_per_stage holds 1.5 is not a whole number"},
      {"{" + good + "}", "key 'step' not found"},
      {"{\"step\": 0, " + good + "}", "step 0 is not a step (1 or more)"},
      {"{\"step\": 3, \"schedule\": \"\\u001b[2J\", " + good.substr(good.find("\"stages")) + "}",
       "schedule '\\x1B[2J' is not a schedule kind"},
      {"{\"step\": 3, " + std::string(good).replace(good.find("[2, 2]"), 6, "[2, 0]") + "}",
       "layers_per_stage holds 0: every stage has a layer"},
      {"{\"step\": 3, " + std::string(good).replace(good.find("[1]"), 3, "[-1]") + "}",
       "rank_speed holds -1: speeds are above 0"},
      {"{\"step\": 3, " + std::string(good).replace(good.find("10"), 2, "1e999") + "}",
       "number overflow parsing '1e999'"},
      {std::string(kMaxReplanRequestBytes + 1, ' '), "' is larger than the limit of 1048576 bytes"}};
  for (const auto& [text, says] : files) {
    std::ofstream(replan_request_path(dir)) << text;
    test::expect_error_with([&] { read_replan_request(dir); }, {replan_request_path(dir), says});
  }
  std::system(("rm -rf '" + dir + "'").c_str());
}

// A request of the right form whose cut does not fit the run (another model's, a stale one) is refused before the
// ranks start again, naming the file and the rule the options break.
TEST(Replan, ARequestThatCannotRunIsRefusedBeforeTheRanksStartAgain) {
  TrainConfig c;
  c.pipeline.schedule = "dualpipev", c.parallel.pp = 2, c.pipeline.microbatches = 8, c.model.layers = 8, c.checkpoint.dir = "/ckpt";
  ReplanRequest request;
  request.step = 4;
  request.replan.schedule = "zbv", request.replan.layers_per_stage = {2, 2, 2, 1}, request.replan.rank_speed = {1, 1};
  test::expect_error_with([&] { replanned_config(request, c); },
                          {"/ckpt/replan.json: the re-plan cannot run: its cut holds 7 layers, the model 8",
                           "--resume continues on the current cut"});
  request.replan.layers_per_stage = {4, 4};
  test::expect_error_with([&] { replanned_config(request, c); }, {"its cut has 2 stages, zbv over 2 ranks has 4"});
  request.replan.layers_per_stage = {2, 2, 2, 2};
  const TrainConfig next = replanned_config(request, c);
  EXPECT_EQ(next.pipeline.schedule, "zbv");
  EXPECT_TRUE(next.checkpoint.resume);
}

}  // namespace
}  // namespace dualpipe::run
