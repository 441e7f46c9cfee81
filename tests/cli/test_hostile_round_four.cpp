// Issue 75's hardening round four: hostile inputs to the surfaces added since round three (schedules that hold
// data-parallel actions, profiler traces of other programs, the re-plan's files), each refused with exit 2 naming the
// value and the rule before any rank starts, or answered whole. Every run is held to 60 s as a guard against hangs;
// the commands that only read files also to 1 GiB of address space.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "cli/run_command.h"

namespace dualpipe::test {
namespace {

class HostileRoundFour : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "dualpipe_round_four_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_EQ(std::system(("rm -rf '" + dir_ + "' && mkdir -p '" + dir_ + "'").c_str()), 0);
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  // `dualpipe ARGS` in the scratch folder; `bounded`: within 1 GiB of address space (not for train, whose
  // LibTorch maps more at start-up).
  CommandResult dualpipe(const std::string& args, bool bounded = true) {
    return run_command("cd '" + dir_ + "' && " + (bounded ? kAddressLimit : "") + "timeout 60 '" + DUALPIPE_BIN +
                       "' " + args);
  }
  void write(const std::string& name, const std::string& contents) {
    std::ofstream(dir_ + "/" + name, std::ios::binary) << contents;
  }
#if defined(__SANITIZE_ADDRESS__)
  static constexpr const char* kAddressLimit = "";
#else
  static constexpr const char* kAddressLimit = "ulimit -v 1048576 && ";
#endif
  std::string dir_;
};

const std::string kTinyTrain =
    "train --steps 1 --layers 2 --hidden 32 --heads 2 --seq-len 16 --eval-every 0 --sample-tokens 0 --trace '' ";

// A schedule file written with --dp and --zero already holds UNSHARD/RESHARD/REDUCE_GRAD. train started every rank,
// each failing in a lowering pass (exit 1), or with --dp 1 trained ignoring them; simulate named the pass.
TEST_F(HostileRoundFour, AScheduleFileThatHoldsDataParallelActionsIsNotGivenThemTwice) {
  ASSERT_EQ(dualpipe("schedule --kind 1f1b -r 2 -m 2 --dp 2 --zero 3 -o z3.txt").status, 0);
  for (const std::string dp : {"--dp 2 --zero 3", "--dp 1"}) {
    const CommandResult run = dualpipe(kTinyTrain + "--schedule-file z3.txt " + dp, false);
    EXPECT_REFUSED(run, "--schedule-file 'z3.txt' holds data-parallel actions (0UNSHARD on rank 0): dualpipe train "
                        "places UNSHARD, RESHARD and REDUCE_GRAD itself from --dp and --zero");
    EXPECT_FALSE(contains(run.out, "dualpipe launch:")) << "ranks were started: " << run.out;
  }
  EXPECT_REFUSED(dualpipe("simulate --from z3.txt --dp 2 --zero 3"),
                 "'z3.txt' already holds its data-parallel actions (0UNSHARD on rank 0): leave --dp and --zero out");
  EXPECT_EQ(dualpipe("simulate --from z3.txt --cost F=1,B=2,unshard=1,reduce=1").status, 0);
}

// A schedule file that breaks a rule of the IR is bad input as any other: exit 2 (it was 1, as for a fault).
TEST_F(HostileRoundFour, AnInvalidScheduleFileEndsTrainWithExitTwo) {
  write("missing.txt", "rank 0: 0F0 0F1 0B0\nrank 1: 1F0 1B0 1F1 1B1\n");
  const CommandResult run = dualpipe(kTinyTrain + "--schedule-file missing.txt", false);
  EXPECT_REFUSED(run, "invalid custom schedule");
  EXPECT_TRUE(contains(run.out, "0B1")) << run.out;
}

}  // namespace
}  // namespace dualpipe::test
