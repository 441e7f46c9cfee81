// The pieces of the training library checked on their own against values worked out by hand: the stage cut,
// the learning-rate schedule, the model's independence of its cut, and the checkpoint manifest's checks.
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "dualpipe/comm/backend.h"
#include "dualpipe/comm/in_process_communicator.h"
#include "dualpipe/models/gpt.h"
#include "dualpipe/run/train_values.h"
#include "dualpipe/train/checkpoint.h"
#include "dualpipe/train/lr_schedule.h"
#include "dualpipe/train/trainer.h"
#include "dualpipe/util/error.h"

namespace dualpipe::train {
namespace {

namespace fs = std::filesystem;

TEST(StageCut, BalancedPutsTheLargerPartsFirst) {
  EXPECT_EQ(models::StageCut::balanced(10, 4).layers_per_stage, (std::vector<int>{3, 3, 2, 2}));
  EXPECT_EQ(models::StageCut::balanced(8, 8).layers_per_stage, std::vector<int>(8, 1));
  EXPECT_EQ(models::StageCut::of({3, 4, 4, 3}, 14, 4).first_layer(2), 7);
  EXPECT_THROW(models::StageCut::balanced(3, 4), InvalidArgument);
}

// --layers-per-stage as the command line reads it (run/train_values.h), then cut for the schedule.
TEST(StageCut, ParseNamesWhatIsWrong) {
  auto message = [](const std::string& text, int layers, int stages) {
    try {
      models::StageCut::of(run::parse_layer_counts(text), layers, stages);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message("3,4,4", 14, 4).find("gives 3 stages, but the schedule has 4"), std::string::npos);
  EXPECT_NE(message("3,4,4,2", 14, 4).find("adds up to 13 layers, but --layers is 14"), std::string::npos);
  EXPECT_NE(message("3,0,4,7", 14, 4).find("'0' is not a positive layer count"), std::string::npos);
  EXPECT_NE(message("3,,4,7", 14, 4).find("'' is not a positive layer count"), std::string::npos);
  EXPECT_NE(message("3,4x,4,3", 14, 4).find("'4x'"), std::string::npos);
}

// Groups handed in by a library user must fit the config: a missing or mis-sized one is named before training.
TEST(RunTrainingRank, GroupsThatDoNotFitTheConfigAreNamed) {
  auto message = [](const TrainConfig& config, const parallel::MeshGroups& groups, int world_size) {
    auto hub = std::make_shared<comm::InProcessHub>(world_size);
    try {
      run_training_rank(config, std::make_shared<comm::InProcessCommunicator>(hub, 0), groups);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  // A group of one rank: this process alone.
  auto alone = [] {
    comm::ProcessGroupSpec spec;
    spec.interface = "lo";
    return comm::make_process_group(c10::make_intrusive<c10d::HashStore>(), 0, 1, spec);
  };
  TrainConfig config;
  config.parallel.pp = 2;
  config.parallel.dp = 2;
  EXPECT_EQ(message(config, {}, 4), "the pipeline group has 0 ranks but --pp is 2");
  config.parallel.pp = 1;
  parallel::MeshGroups groups;
  groups.pipeline = alone();
  EXPECT_EQ(message(config, groups, 2), "the data-parallel group has 0 ranks but --dp is 2");
  groups.data_parallel = alone();
  EXPECT_EQ(message(config, groups, 2), "the data-parallel group has 1 ranks but --dp is 2");
  config.parallel.dp = 1;
  EXPECT_EQ(message(config, groups, 3), "the world has 3 ranks but --pp 1 x --dp 1 is 1");
}

TEST(LrSchedule, WarmsUpLinearlyThenFollowsTheCosineToMinLr) {
  // 3 warm-up steps of 1/4, 2/4, 3/4; the cosine runs over steps 4 to 12.
  const LrSchedule s{1.0, 0.1, 3, 12};
  EXPECT_DOUBLE_EQ(s.at(1), 0.25);
  EXPECT_DOUBLE_EQ(s.at(3), 0.75);
  EXPECT_DOUBLE_EQ(s.at(4), 1.0);
  EXPECT_NEAR(s.at(8), 0.55, 1e-15);  // halfway: 0.1 + 0.9 * (1 + cos(pi/2)) / 2
  EXPECT_DOUBLE_EQ(s.at(12), 0.1);
  EXPECT_DOUBLE_EQ(s.at(20), 0.1);  // past the planned steps (a resumed run with more --steps)
}

// A GPT of `layers` blocks small enough to compare whole outputs: width 16, 2 heads, sequences of 8 tokens.
models::GptConfig tiny_gpt(int layers) {
  models::GptConfig c;
  c.hidden = 16;
  c.heads = 2;
  c.layers = layers;
  c.seq_len = 8;
  return c;
}

TEST(Gpt, TheModelIsTheSameWhicheverCutBuildsIt) {
  models::GptConfig c = tiny_gpt(4);
  c.seed = 3;
  const torch::Tensor ids = torch::randint(256, {2, 8}, torch::kLong);
  auto run = [&](const models::StageCut& cut) {
    runtime::Tensors x = {ids};
    for (int s = 0; s < cut.num_stages(); ++s) x = models::GptStage(c, cut, s)->forward(x);
    return x[0];
  };
  const torch::Tensor whole = run(models::StageCut{{4}});
  EXPECT_EQ(whole.sizes(), (std::vector<int64_t>{2, 8, 256}));
  EXPECT_TRUE(torch::equal(run(models::StageCut{{1, 3}}), whole));
  EXPECT_TRUE(torch::equal(run(models::StageCut{{2, 1, 1}}), whole));
  // The parameter count formula against the modules.
  int64_t counted = 0;
  for (int s = 0; s < 2; ++s)
    for (const auto& p : models::GptStage(c, models::StageCut{{1, 3}}, s)->parameters()) counted += p.numel();
  EXPECT_EQ(counted, c.parameter_count());
}

TEST(Gpt, PositionIAttendsOnlyToPositionsUpToI) {
  const models::GptConfig c = tiny_gpt(2);
  models::GptStage model(c, models::StageCut{{2}}, 0);
  torch::Tensor ids = torch::randint(256, {1, 8}, torch::kLong);
  const torch::Tensor before = model->forward({ids})[0];
  ids[0][5] = (ids[0][5].item<int64_t>() + 1) % 256;
  const torch::Tensor after = model->forward({ids})[0];
  EXPECT_TRUE(torch::equal(before.slice(1, 0, 5), after.slice(1, 0, 5)));
  EXPECT_FALSE(torch::equal(before.slice(1, 5, 8), after.slice(1, 5, 8)));
}

TEST(NextTokenLoss, UniformLogitsCostLnVocab) {
  const torch::Tensor logits = torch::zeros({2, 3, 256});
  const torch::Tensor targets = torch::randint(256, {2, 3}, torch::kLong);
  EXPECT_NEAR(models::next_token_loss(logits, targets).item<double>(), std::log(256.0), 1e-6);
  EXPECT_NEAR(models::next_token_loss(logits, targets, 4).item<double>(), std::log(256.0) / 4, 1e-6);
}

}  // namespace
}  // namespace dualpipe::train
