// Real processes: R = 4 ranks of runtime_gloo_worker talk over Gloo/TCP, each checking its step against its own
// single-process reference. Workers that do not finish in time are killed, so a hang fails the test and never
// leaves processes behind.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "runtime/support/rank_processes.h"

namespace {

void expect_all_pass(const std::vector<std::string>& args) {
  const std::vector<int> codes =
      dualpipe::testing::run_rank_processes(DUALPIPE_GLOO_WORKER, 4, args, std::chrono::seconds(90));
  ASSERT_EQ(codes.size(), 4u);
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(codes[r], 0) << "rank " << r << (codes[r] == -1 ? " hung and was killed" : " reported a mismatch or error");
}

TEST(GlooProcesses, DualPipeFourRanks) { expect_all_pass({"dualpipe"}); }
TEST(GlooProcesses, DualPipeVFourRanks) { expect_all_pass({"dualpipev"}); }
TEST(GlooProcesses, DualPipeFourRanksForwardOnly) { expect_all_pass({"dualpipe", "forward-only"}); }
// Issue 8: every message with tag 0, as on NCCL, which ignores tags: all nine kinds still bit-identical.
TEST(GlooProcesses, AllKindsWithOneTagForEveryMessage) { expect_all_pass({"all", "single-tag"}); }
// Issue 8: a pipeline on a user-built sub-group of a larger Gloo world (two pipelines side by side).
TEST(GlooProcesses, PipelinesOnUserSuppliedSubgroups) { expect_all_pass({"subgroups"}); }

}  // namespace
