// Issue 3, item 7 and issue 8: bad input raises a clear dualpipe::Error before any message is posted, naming the
// stage, the micro-batch (or the construction-time shape check), the value and the rule.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>

#include "dualpipe/comm/gloo_communicator.h"
#include "dualpipe/comm/in_process_communicator.h"
#include "dualpipe/runtime/executor.h"
#include "dualpipe/runtime/mlp_stage.h"
#include "dualpipe/schedule/generators.h"

namespace dualpipe::runtime {
namespace {

// Counts the transfers its ranks start, to prove errors come before communication.
class CountingCommunicator : public comm::InProcessCommunicator {
 public:
  using InProcessCommunicator::InProcessCommunicator;
  std::shared_ptr<comm::Work> isend(const at::Tensor& t, int dst, int tag) override {
    ++transfers;
    return InProcessCommunicator::isend(t, dst, tag);
  }
  std::shared_ptr<comm::Work> irecv(at::Tensor& t, int src, int tag) override {
    ++transfers;
    return InProcessCommunicator::irecv(t, src, tag);
  }
  int transfers = 0;
};

constexpr int64_t kHidden = 8, kRows = 2;

struct OneRank {
  explicit OneRank(int rank, const std::string& kind = "1f1b", int num_ranks = 2, int hub_ranks = 2)
      : hub(std::make_shared<comm::InProcessHub>(hub_ranks, std::chrono::seconds(5))),
        comm(std::make_shared<CountingCommunicator>(hub, rank)),
        schedule(make_schedule(kind, {num_ranks, 2 * num_ranks})) {
    for (int m = 0; m < schedule.num_microbatches; ++m)
      for (int s = 0; s < schedule.num_stages; ++s)
        if (schedule.placement.rank(s, m) == rank && !stages.count(s)) stages[s] = make_stage(MlpStage(kHidden));
    options.boundaries = ExecutorOptions::uniform({{{kRows, kHidden}, torch::kFloat}}, schedule.num_stages);
  }
  Executor executor() { return Executor(schedule, stages, comm, options); }
  StepArgs good_args(const Executor& e) const {
    StepArgs args;
    auto k = static_cast<int64_t>(e.entering_microbatches().size());
    auto l = static_cast<int64_t>(e.loss_microbatches().size());
    if (k) args.inputs = {torch::randn({k * kRows, kHidden})};
    if (l) args.labels = {torch::randn({l * kRows, kHidden})};
    args.criterion = single_tensor_criterion([](const torch::Tensor& o, const torch::Tensor& y) {
      return torch::mse_loss(o, y);
    });
    args.num_microbatches = schedule.num_microbatches;
    return args;
  }

  std::shared_ptr<comm::InProcessHub> hub;
  std::shared_ptr<CountingCommunicator> comm;
  Schedule schedule;
  std::map<int, std::shared_ptr<Stage>> stages;
  ExecutorOptions options;
};

// Expects step() to throw an Error whose message contains `needle`, with no transfer started.
void expect_rejected(OneRank& rank, Executor& executor, const StepArgs& args, const std::string& needle) {
  try {
    executor.step(args);
    FAIL() << "step() accepted bad input (expected an error mentioning '" << needle << "')";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
  EXPECT_EQ(rank.comm->transfers, 0) << "communication started before the error";
}

TEST(BadInput, WrongInputShape) {
  OneRank rank(0);
  auto executor = rank.executor();
  auto args = rank.good_args(executor);
  args.inputs = {torch::randn({4 * kRows, kHidden + 1})};
  expect_rejected(rank, executor, args, "is [2, 9] Float, boundary 0 declares [2, 8] Float");
}

TEST(BadInput, WrongInputDtype) {
  OneRank rank(0);
  auto executor = rank.executor();
  auto args = rank.good_args(executor);
  args.inputs = {args.inputs[0].to(torch::kDouble)};
  expect_rejected(rank, executor, args, "Double");
}

TEST(BadInput, BatchDoesNotSplitIntoMicrobatches) {
  OneRank rank(0);
  auto executor = rank.executor();
  auto args = rank.good_args(executor);
  args.inputs = {torch::randn({4 * kRows + 1, kHidden})};
  expect_rejected(rank, executor, args, "do not split into 4");
}

TEST(BadInput, MicrobatchCountDiffersFromSchedule) {
  OneRank rank(0);
  auto executor = rank.executor();
  auto args = rank.good_args(executor);
  args.num_microbatches = 8;
  expect_rejected(rank, executor, args, "M=4");
}

TEST(BadInput, MissingCriterionOnLossRank) {
  OneRank rank(1);
  auto executor = rank.executor();
  auto args = rank.good_args(executor);
  args.criterion = nullptr;
  expect_rejected(rank, executor, args, "no criterion");
}

TEST(BadInput, MissingLabelsOnLossRank) {
  OneRank rank(1);
  auto executor = rank.executor();
  auto args = rank.good_args(executor);
  args.labels = {};
  expect_rejected(rank, executor, args, "give either labels (whole batches) or microbatch_labels, got neither");
}

TEST(BadInput, MissingInputsOnEntryRank) {
  OneRank rank(0, "dualpipe");
  auto executor = rank.executor();
  auto args = rank.good_args(executor);
  args.inputs = {};
  expect_rejected(rank, executor, args, "give either inputs (whole batches) or microbatch_inputs, got neither");
}

TEST(BadInput, ScheduleRankCountDiffersFromGroup) {
  OneRank rank(0, "1f1b", 2, 4);
  try {
    rank.executor();
    FAIL() << "a 2-rank schedule was accepted on a 4-rank communicator";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("the schedule has 2 ranks but the communicator has 4"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(rank.comm->transfers, 0);
}

TEST(BadInput, ModulesDoNotMatchPlacement) {
  OneRank rank(0);
  rank.stages.erase(0);
  EXPECT_THROW(rank.executor(), InvalidArgument);
  rank.stages[0] = make_stage(MlpStage(kHidden));
  rank.stages[1] = make_stage(MlpStage(kHidden));  // stage 1 runs on rank 1 under 1F1B
  EXPECT_THROW(rank.executor(), InvalidArgument);
}

TEST(BadInput, RankMappingMustBeDistinctRanks) {
  OneRank rank(0, "1f1b", 2, 4);
  rank.options.rank_mapping = {0, 0};
  EXPECT_THROW(rank.executor(), InvalidArgument);
  rank.options.rank_mapping = {1, 2};  // communicator rank 0 is not in the pipeline
  EXPECT_THROW(rank.executor(), InvalidArgument);
}

// Builds the executor and expects it to refuse, with `needle` in the message and no transfer started.
void expect_construction_rejected(OneRank& rank, const std::string& needle) {
  try {
    rank.executor();
    FAIL() << "accepted; expected an error containing: " << needle;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
  EXPECT_EQ(rank.comm->transfers, 0);
}

// A stage whose forward returns [x, x]: one tensor more than a one-tensor boundary declares.
std::shared_ptr<Stage> two_output_stage() {
  MlpStage m(kHidden);
  return std::make_shared<ModuleStage>(m.ptr(), [m](const Tensors& x) mutable -> Tensors {
    auto y = m->forward(x.at(0));
    return {y, y};
  });
}

TEST(BadInput, StageReturnsWrongNumberOfTensors) {
  OneRank rank(0);
  rank.stages[0] = two_output_stage();
  expect_construction_rejected(rank, "stage 0 returned 2 tensors for the shape check, boundary 1 declares 1");
}

TEST(BadInput, DtypeMismatchBetweenStages) {
  // Boundary 1 says doubles; stage 0 makes floats (its rank says so) and stage 1 cannot take doubles (its rank
  // says so, with LibTorch's reason).
  OneRank producer(0), consumer(1);
  producer.options.boundaries[1][0].dtype = torch::kDouble;
  consumer.options.boundaries[1][0].dtype = torch::kDouble;
  expect_construction_rejected(producer, "stage 0 returned tensor 0 as [2, 8] Float on cpu for the shape check, "
                                         "boundary 1 declares [2, 8] Double");
  // The rest of the message is LibTorch's own ("expected m1 and m2 to have the same dtype, but got: double !=
  // float" in 2.11).
  expect_construction_rejected(consumer, "stage 1 failed on zeros shaped like its declared inputs (boundary 1): ");
}

TEST(BadInput, DeviceMismatchBetweenStages) {
  OneRank rank(0);
  rank.options.boundaries[1][0].device = c10::Device("cuda:0");  // the next stage expects its input on a GPU
  expect_construction_rejected(rank, "stage 0 returned tensor 0 as [2, 8] Float on cpu for the shape check, "
                                     "boundary 1 declares [2, 8] Float on cuda:0");
}

TEST(BadInput, BoundaryCountDiffersFromStages) {
  OneRank rank(0);
  rank.options.boundaries.pop_back();
  expect_construction_rejected(rank, "ExecutorOptions::boundaries needs S+1 = 3 entries (or none), got 2");
}

TEST(BadInput, BatchSmallerThanItsMicrobatchCount) {
  OneRank rank(0);
  auto executor = rank.executor();
  auto args = rank.good_args(executor);
  args.inputs = {torch::randn({3, kHidden})};  // 4 micro-batches enter rank 0 under 1F1B
  expect_rejected(rank, executor, args, "input tensor 0 has 3 rows, which do not split into 4 micro-batches");
}

TEST(BadInput, MicrobatchListOfTheWrongLength) {
  OneRank rank(0);
  auto executor = rank.executor();
  auto args = rank.good_args(executor);
  args.inputs.clear();
  args.microbatch_inputs = {{torch::randn({kRows, kHidden})}};
  expect_rejected(rank, executor, args, "rank 0 feeds 4 micro-batches into stage 0 but got 1 microbatch_inputs");
}

TEST(BadInput, GlooEnvironmentMissing) {
  ::unsetenv("MASTER_ADDR");
  EXPECT_THROW(comm::GlooCommunicator::options_from_environment(), InvalidArgument);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", "29500", 1);
  ::setenv("WORLD_SIZE", "2", 1);
  ::setenv("RANK", "2", 1);
  try {
    comm::GlooCommunicator::options_from_environment();
    FAIL() << "RANK=2 accepted for WORLD_SIZE=2";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("RANK='2'"), std::string::npos) << e.what();
  }
  for (const char* v : {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"}) ::unsetenv(v);
}

}  // namespace
}  // namespace dualpipe::runtime
