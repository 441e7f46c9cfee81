// run/: a training run's options and their rules, on their own. The rules are the trainer's own (the CLI tests run
// them through `dualpipe train`); here each is met once by a config a planner could make, and the table turns a
// config into arguments that name exactly what differs from the defaults.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dualpipe/run/train_options.h"
#include "dualpipe/run/train_rules.h"
#include "dualpipe/run/train_values.h"
#include "test_helpers.h"

namespace dualpipe::run {
namespace {

std::string refusal(const TrainConfig& c) { return test::error_text([&] { check_options(c); }); }

TEST(TrainRules, EachParallelismsRuleIsNamedWithItsOptions) {
  TrainConfig c;
  EXPECT_EQ(refusal(c), "(no error)");
  c.parallel.zero = ZeroStage::Parameters;
  EXPECT_EQ(refusal(c), "--zero 3 needs --dp above 1, got --dp 1: it shards over the data-parallel replicas");
  c.parallel.dp = 2;
  EXPECT_EQ(refusal(c), "(no error)");
  c.parallel.ep = 4;
  EXPECT_EQ(refusal(c), "--ep 4 must divide --dp 2: expert parallelism runs across the data-parallel replicas of a "
                        "stage");
  c.parallel.ep = 1, c.parallel.tp = 3;
  EXPECT_TRUE(test::contains(refusal(c), "--tp 3 must divide --heads 4")) << refusal(c);
  c.parallel.tp = 2, c.parallel.sp = true, c.parallel.cp = 2;
  EXPECT_EQ(refusal(c), "--cp with --sp is not supported yet: use --cp with --tp alone");
}

// The straggler options, refused before any rank starts, each naming its value and the rule.
TEST(TrainRules, StragglerOptionsAreInTheirRangesAndHaveWhatTheyNeed) {
  TrainConfig c;
  c.stragglers.threshold = 1;
  EXPECT_EQ(refusal(c), "--straggler-threshold must be above 1 and at most 100 (times the median), got 1");
  c.stragglers.threshold = 1.15, c.stragglers.steps = 0;
  EXPECT_EQ(refusal(c), "--straggler-steps must be between 1 and 100000, got 0");
  c.stragglers.steps = 5;
  EXPECT_EQ(test::error_text([] { parse_word<StragglerAction>("restart"); }),
            "--on-straggler must be report or replan, got 'restart'");
  c.stragglers.action = StragglerAction::Replan;
  EXPECT_TRUE(test::contains(refusal(c), "--on-straggler replan needs --checkpoint-dir DIR")) << refusal(c);
  c.checkpoint.dir = "/tmp/x";
  EXPECT_EQ(refusal(c), "(no error)");
  c.stragglers.rank_speed = {1, 1, 0.5};
  EXPECT_EQ(refusal(c), "--rank-speed '1,1,0.5' has 3 values for --ranks 4; give one per pipeline rank");
  c.stragglers.rank_speed = {1, 1, 0, 1};
  EXPECT_TRUE(test::contains(refusal(c), "--rank-speed '1,1,0,1': value 3 ('0') must be a number from 0.001 to 1000"))
      << refusal(c);
  // Round four (issue 75): a speed of 1e-308 passed and made every cost overflow the simulated step.
  c.stragglers.rank_speed = {1, 1e-308, 1, 1};
  EXPECT_TRUE(test::contains(refusal(c), "value 2 ('1e-308') must be a number from 0.001 to 1000")) << refusal(c);
  c.stragglers.rank_speed = {}, c.stragglers.emulate_slow_rank = "2=1.5@5";
  EXPECT_EQ(refusal(c), "--emulate-slow-rank slows the emulated device: give --emulate-device COSTS");
  c.device.emulate = "F=2,B=4,W=2", c.stragglers.emulate_slow_rank = "9=1.5";
  EXPECT_EQ(refusal(c), "--emulate-slow-rank '9=1.5': RANK must be a pipeline rank, 0 to 3");
}

TEST(TrainRules, TheScheduleTheOptionsNameKeepsItsGeneratorsRules) {
  TrainConfig c;
  c.parallel.pp = 4, c.pipeline.microbatches = 6;  // DualPipe needs M >= 2R
  EXPECT_TRUE(test::contains(test::error_text([&] { schedule_of(c); }), "M=6")) << test::error_text([&] {
    schedule_of(c);
  });
  c.pipeline.microbatches = 8;
  const Schedule s = schedule_of(c);
  EXPECT_EQ(s.num_stages, 4);                // the model cut in R stages,
  EXPECT_EQ(s.placement.stages_held(0), 2);  // each held twice: rank r holds stages r and R-1-r
}

TEST(TrainRules, TheTrainersModelIsAByteLevelGeluTransformer) {
  ModelFeatures m;
  m.hidden = 128, m.ffn_hidden = 512, m.heads = 4;
  EXPECT_EQ(unsupported_model(m), "");
  m.kv_heads = 1;
  EXPECT_EQ(unsupported_model(m), "the trainer has no grouped-query attention");
  m.kv_heads = 0, m.vocab = 32000;
  EXPECT_EQ(unsupported_model(m), "the trainer's model reads bytes (vocab 256), this one has vocab 32000");
}

TEST(TrainOptions, ArgumentsNameWhatDiffersFromTheDefaultsInTheTablesOrder) {
  TrainConfig c;
  EXPECT_EQ(command_arguments(c, false), std::vector<std::string>{});
  c.parallel.dp = 2, c.parallel.zero = ZeroStage::OptimizerState, c.pipeline.fb_overlap = false, c.model.layers = 12;
  EXPECT_EQ(command_arguments(c, false),
            (std::vector<std::string>{"--dp", "2", "--zero", "1", "--no-fb-overlap", "--layers", "12"}));
  // A field asked for is shown even at its default.
  EXPECT_EQ(command_arguments(TrainConfig{}, false, {DUALPIPE_TRAIN_FIELD(parallel.pp)}),
            (std::vector<std::string>{"--ranks", "4"}));
  // Every option, for the ranks: each switch either way, each value exactly.
  const std::vector<std::string> every = command_arguments(c, true);
  EXPECT_NE(std::find(every.begin(), every.end(), "--dp-overlap"), every.end());
  const auto lr = std::find(every.begin(), every.end(), "--lr");
  ASSERT_NE(lr, every.end());
  EXPECT_EQ(*(lr + 1), "0.0060000000000000001");  // 6e-3 to 17 significant digits: read back as the same double
}

// Words and lists are parsed once, where the text comes in, and printed back as the ranks read them.
TEST(TrainOptions, WordsAndListsAreParsedOnceAndPrintedBackAsGiven) {
  const auto option = [](const std::string& name) {
    for (const TrainOption& o : train_options())
      if (primary_name(o) == name) return o;
    throw std::runtime_error("no option " + name);
  };
  TrainConfig c;
  set_value_text(option("--fb-overlap-mode"), c, "threads");
  set_value_text(option("--device"), c, "cuda");
  set_value_text(option("--backend"), c, "gloo");
  set_value_text(option("--on-straggler"), c, "replan");
  set_value_text(option("--zero"), c, "2");
  set_value_text(option("--layers-per-stage"), c, "3,4,4,3");
  set_value_text(option("--rank-speed"), c, "1,1,0.67,1");
  EXPECT_EQ(c.pipeline.fb_overlap_mode, OverlapMode::Threads);
  EXPECT_EQ(c.device.kind, DeviceKind::Cuda);
  EXPECT_EQ(c.device.backend, Backend::Gloo);
  EXPECT_EQ(c.stragglers.action, StragglerAction::Replan);
  EXPECT_EQ(c.parallel.zero, ZeroStage::Gradients);
  EXPECT_EQ(c.model.layers_per_stage, (std::vector<int>{3, 4, 4, 3}));
  EXPECT_EQ(c.stragglers.rank_speed, (std::vector<double>{1, 1, 0.67, 1}));
  for (const char* name : {"--fb-overlap-mode", "--device", "--backend", "--on-straggler", "--zero"})
    EXPECT_EQ(value_text(option(name), c), std::string(name == std::string("--fb-overlap-mode") ? "threads"
                                                       : name == std::string("--device")        ? "cuda"
                                                       : name == std::string("--backend")       ? "gloo"
                                                       : name == std::string("--on-straggler")  ? "replan"
                                                                                                : "2"));
  EXPECT_EQ(value_text(option("--layers-per-stage"), c), "3,4,4,3");
  EXPECT_EQ(value_text(option("--rank-speed"), c), "1,1,0.67,1");  // read back as the same doubles
  c.stragglers.rank_speed = {1.0 / 3};
  TrainConfig back;
  set_value_text(option("--rank-speed"), back, value_text(option("--rank-speed"), c));
  EXPECT_EQ(back.stragglers.rank_speed, c.stragglers.rank_speed);
  // Bad words name the option, the words and the text.
  EXPECT_EQ(test::error_text([&] { set_value_text(option("--device"), c, "tpu"); }),
            "--device must be cpu or cuda, got 'tpu'");
  EXPECT_EQ(test::error_text([&] { set_value_text(option("--zero"), c, "4"); }),
            "--zero must be 0, 1, 2 or 3, got '4'");
  EXPECT_TRUE(test::contains(test::error_text([&] { set_value_text(option("--layers-per-stage"), c, "3,x"); }),
                             "'x' is not a positive layer count"));
}

}  // namespace
}  // namespace dualpipe::run
