// `dualpipe launch` beyond one machine and one attempt: torchrun's multi-node contract (which ranks a node runs
// and the variables they get, as torch.distributed.run documents them), the checks of the rendezvous address,
// the restart policy, and the blame for a rank that failed on another node. Ranks are /bin/sh programs; the
// reference is torchrun's documented environment and what the programs were told to do.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "cli/run_command.h"
#include "dualpipe/launch/failure_report.h"

namespace {

using dualpipe::test::run_command;

std::string quoted_dualpipe() { return std::string("'") + DUALPIPE_BIN + "'"; }

using dualpipe::test::contains;

// A socket listening on a free loopback port, held for the test's duration.
struct HeldPort {
  int fd = -1;
  int port = 0;
  HeldPort() {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t n = sizeof a;
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), n) == 0 && listen(fd, 1) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) == 0)
      port = ntohs(a.sin_port);
  }
  ~HeldPort() { close(fd); }
};

const char* kPrintEnvironment =
    "echo \"RANK=$RANK LOCAL_RANK=$LOCAL_RANK GROUP_RANK=$GROUP_RANK ROLE_RANK=$ROLE_RANK "
    "LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE WORLD_SIZE=$WORLD_SIZE GROUP_WORLD_SIZE=$GROUP_WORLD_SIZE "
    "ROLE_WORLD_SIZE=$ROLE_WORLD_SIZE MASTER=$MASTER_ADDR:$MASTER_PORT "
    "RESTART=$TORCHELASTIC_RESTART_COUNT/$TORCHELASTIC_MAX_RESTARTS\"";

TEST(LaunchNodes, EachNodeRunsItsShareOfTheRanksWithTorchrunsVariables) {
  // torchrun --nnodes 2 --nproc-per-node 2: node 1 runs global ranks 2 and 3, as local ranks 0 and 1, in group 1.
  const auto node1 = run_command(quoted_dualpipe() + " launch --nnodes 2 --node-rank 1 --nproc-per-node 2 "
                                 "--master-addr 127.0.0.1 --master-port 29517 -- sh -c '" + kPrintEnvironment + "'");
  ASSERT_EQ(node1.status, 0) << node1.out;
  EXPECT_TRUE(contains(node1.out, "dualpipe launch: node 1 of 2: ranks 2-3 of 4, MASTER_ADDR=127.0.0.1, "
                                  "MASTER_PORT=29517")) << node1.out;
  EXPECT_TRUE(contains(node1.out, "[rank 2] RANK=2 LOCAL_RANK=0 GROUP_RANK=1 ROLE_RANK=2 LOCAL_WORLD_SIZE=2 "
                                  "WORLD_SIZE=4 GROUP_WORLD_SIZE=2 ROLE_WORLD_SIZE=4 MASTER=127.0.0.1:29517 "
                                  "RESTART=0/0")) << node1.out;
  EXPECT_TRUE(contains(node1.out, "[rank 3] RANK=3 LOCAL_RANK=1 GROUP_RANK=1 ROLE_RANK=3 LOCAL_WORLD_SIZE=2 "
                                  "WORLD_SIZE=4")) << node1.out;
  EXPECT_FALSE(contains(node1.out, "[rank 0]")) << node1.out;
}

TEST(LaunchNodes, AWorldThatDoesNotDivideLeavesTheLastNodeFewerRanks) {
  const auto last = run_command(quoted_dualpipe() + " launch --nnodes 2 --node-rank 1 --nproc-per-node 2 --world-size 3 "
                                "--master-addr 127.0.0.1 -- sh -c '" + kPrintEnvironment + "'");
  ASSERT_EQ(last.status, 0) << last.out;
  EXPECT_TRUE(contains(last.out, "node 1 of 2: rank 2 of 3, MASTER_ADDR=127.0.0.1, MASTER_PORT=29500")) << last.out;
  EXPECT_TRUE(contains(last.out, "[rank 2] RANK=2 LOCAL_RANK=0 GROUP_RANK=1 ROLE_RANK=2 LOCAL_WORLD_SIZE=1 "
                                 "WORLD_SIZE=3")) << last.out;
}

TEST(LaunchNodes, ATakenMasterPortIsRefusedBeforeAnyRankStarts) {
  HeldPort held;
  ASSERT_NE(held.port, 0);
  const auto run = run_command(quoted_dualpipe() + " launch --nproc 2 --master-port " + std::to_string(held.port) +
                               " -- sh -c 'echo started'");
  EXPECT_EQ(run.status, 2) << run.out;
  EXPECT_TRUE(contains(run.out, "dualpipe: --master-port " + std::to_string(held.port) +
                                    " is already taken on this machine (Address already in use)")) << run.out;
  EXPECT_FALSE(contains(run.out, "started")) << run.out;
}

TEST(LaunchNodes, AFailedRankRestartsEveryRankUntilAnAttemptSucceeds) {
  // Attempt 0: rank 1 exits 3. Attempt 1: rank 0 kills itself. Attempt 2: everyone succeeds.
  const std::string program =
      "case $TORCHELASTIC_RESTART_COUNT.$RANK in 0.1) exit 3;; 1.0) kill -9 $$;; 2.*) echo done $RANK;; "
      "*) sleep 30;; esac";
  const auto run = run_command(quoted_dualpipe() + " launch --nproc 3 --max-restarts 3 -- sh -c '" + program + "'");
  EXPECT_EQ(run.status, 0) << run.out;
  EXPECT_TRUE(contains(run.out, "dualpipe launch: restart 1 of 3: rank 1 exited with status 3; starting all 3 ranks "
                                "again")) << run.out;
  EXPECT_TRUE(contains(run.out, "dualpipe launch: restart 2 of 3: rank 0 was killed by signal 9 (SIGKILL); "
                                "starting all 3 ranks again")) << run.out;
  EXPECT_FALSE(contains(run.out, "restart 3 of 3")) << run.out;
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(contains(run.out, "[rank " + std::to_string(r) + "] done " + std::to_string(r)));
}

TEST(LaunchNodes, TheLauncherGivesUpWhenTheRestartsAreUsed) {
  const auto run = run_command(quoted_dualpipe() + " launch --nproc 2 --max-restarts 2 -- sh -c "
                               "'echo attempt $TORCHELASTIC_RESTART_COUNT; [ $RANK = 1 ] && exit 4; sleep 30'");
  EXPECT_EQ(run.status, 1) << run.out;
  EXPECT_TRUE(contains(run.out, "[rank 1] attempt 2")) << run.out;
  EXPECT_FALSE(contains(run.out, "attempt 3")) << run.out;
  EXPECT_TRUE(contains(run.out, "dualpipe launch: giving up: rank 1 exited with status 4, and all 2 restarts are "
                                "used")) << run.out;
}

TEST(LaunchNodes, AStopRequestIsNeverRestarted) {
  const std::string command = quoted_dualpipe() + " launch --nproc 2 --max-restarts 5 -- sh -c " +
                              "'echo attempt $TORCHELASTIC_RESTART_COUNT; sleep 30' & pid=$!; sleep 1; " +
                              "kill -TERM $pid; wait $pid; echo status=$?";
  const auto run = run_command("{ " + command + "; }");
  EXPECT_TRUE(contains(run.out, "status=143")) << run.out;
  EXPECT_TRUE(contains(run.out, "dualpipe launch: got SIGTERM; stopped all 2 ranks")) << run.out;
  EXPECT_FALSE(contains(run.out, "restart")) << run.out;
}

TEST(LaunchNodes, ARankLostOnAnotherNodeIsBlamedAndTheLocalRanksAreItsConsequences) {
  using namespace dualpipe::launch;
  // Node 1 runs ranks 2 and 3 of 4; both lost rank 0, which runs on node 0.
  const std::vector<RankEnd> ended = {{2, 1 << 8, 1, blamed_rank("rank 2: rank 0 stopped responding", 2, 4)},
                                      {3, 1 << 8, 1, blamed_rank("peer rank 0 closed the connection", 3, 4)}};
  ASSERT_EQ(ended[0].blames, 0);
  ASSERT_EQ(ended[1].blames, 0);
  const FailureReport report = describe_failure(ended, 0, 2);
  ASSERT_EQ(report.lines.size(), 3u);
  EXPECT_EQ(report.lines[0], "rank 2 exited with status 1 only because of rank 0 (its error names rank 0)");
  EXPECT_EQ(report.lines[2], "rank 0 runs on another node and was lost (it failed there, or the network to it did; "
                             "see that node's launcher), and ranks 2 and 3 exited because of it; stopped 0 ranks "
                             "still running");
  EXPECT_EQ(report.cause, "rank 0 on another node was lost");
}

}  // namespace
