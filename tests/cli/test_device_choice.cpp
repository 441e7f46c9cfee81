// `dualpipe train --device` and `--backend`: the rules are checked before any rank starts, with exit status 2 and
// a message naming the option and the rule. This machine has no GPU (CI never has one).
#include <gtest/gtest.h>

#include "cli/train_fixture.h"

namespace {

using namespace dualpipe::test;

const std::string kDeviceJob = kSmall + "--schedule 1f1b --ranks 2 --steps 1 ";

// Refused before the launcher starts: no rank ever printed its banner.
void expect_refused(const CommandResult& run, const std::string& rule) {
  EXPECT_EQ(run.status, 2) << run.out;
  EXPECT_TRUE(contains(run.out, rule)) << run.out;
  EXPECT_FALSE(contains(run.out, "[rank 0]")) << run.out;
}

TEST_F(Train, NcclWithCpuStagesIsRefusedBeforeAnyRankStarts) {
  expect_refused(dualpipe_cmd(kDeviceJob + "--backend nccl"),
                 "--backend nccl needs --device cuda: NCCL carries only CUDA tensors");
  expect_refused(dualpipe_cmd(kDeviceJob + "--device cpu --backend nccl"), "--backend nccl needs --device cuda");
}

TEST_F(Train, CudaWithoutAGpuIsRefusedBeforeAnyRankStarts) {
  if (exists("/dev/nvidiactl")) GTEST_SKIP() << "this machine has a GPU";
  expect_refused(dualpipe_cmd(kDeviceJob + "--device cuda"), "--device cuda needs a CUDA GPU, and this machine has none");
  expect_refused(dualpipe_cmd(kDeviceJob + "--device cuda --backend gloo"), "--device cuda needs a CUDA GPU");
}

TEST_F(Train, UnknownDevicesAndBackendsAreNamed) {
  expect_refused(dualpipe_cmd(kDeviceJob + "--device tpu"), "--device must be cpu or cuda, got 'tpu'");
  expect_refused(dualpipe_cmd(kDeviceJob + "--backend mpi"), "--backend must be auto, gloo or nccl, got 'mpi'");
}

TEST_F(Train, GlooOnCpuStagesIsTheDefaultAndTrains) {
  const CommandResult run = dualpipe_cmd(kDeviceJob + "--device cpu --backend gloo");
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_TRUE(contains(run.out, "step matches the single-process reference")) << run.out;
}

}  // namespace
