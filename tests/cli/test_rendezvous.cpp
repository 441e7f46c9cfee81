// The rendezvous of `dualpipe train`'s ranks, wrong in every way a multi-machine start can be wrong: ranks or a
// whole node that never arrive, nodes that disagree on the world size, two processes claiming one rank, and an
// unreachable master address. Each must fail within the timeout (--timeout 3 here) with an error naming the
// value; the reference is what each run was set up to get wrong.
#include <gtest/gtest.h>

#include <string>

#include "cli/free_port.h"
#include "cli/train_fixture.h"

namespace {

using namespace dualpipe::test;

const std::string kWorker = std::string(DUALPIPE_BIN) + " " + kSmall + "--worker --steps 1 --timeout 3 ";

TEST_F(Train, RendezvousNamesTheRanksThatNeverArrived) {
  const std::string port = a_free_port(1);
  const CommandResult alone =
      run_command("MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port + " RANK=0 WORLD_SIZE=4 timeout 20 " + kWorker);
  EXPECT_EQ(alone.status, 1) << alone.out;
  EXPECT_TRUE(contains(alone.out, "rank 0: ranks 1, 2, 3 of 4 never arrived at the rendezvous at 127.0.0.1:" + port +
                                      " within 3 s"))
      << alone.out;
}

TEST_F(Train, ANodeThatNeverArrivesIsNamedByItsRanks) {
  // Node 0 of 2 alone: its launcher starts ranks 0 and 1; ranks 2 and 3 (node 1) never come.
  const std::string port = a_free_port(2);
  const CommandResult run =
      dualpipe_cmd(kSmall + "--steps 1 --timeout 3 --nnodes 2 --node-rank 0 --master-port " + port, 30);
  EXPECT_EQ(run.status, 1) << run.out;
  EXPECT_TRUE(contains(run.out, "ranks 2, 3 of 4 never arrived at the rendezvous at 127.0.0.1:" + port + " within 3 s"))
      << run.out;
  EXPECT_FALSE(contains(run.out, "[rank 2]")) << run.out;
}

TEST_F(Train, NodesStartingLateAreWaitedForUpToTheTimeout) {
  // Node 1 first, and node 0 (which hosts the store) 3 s later: node 1's ranks keep trying to reach the store.
  const std::string common = std::string(DUALPIPE_BIN) + " " + kSmall +
                             "--schedule 1f1b --steps 1 --timeout 20 --nnodes 2 --master-port " + a_free_port(6);
  const CommandResult run = run_command("(timeout 60 " + common + " --node-rank 1 & p1=$!; sleep 3; timeout 60 " +
                                        common + " --node-rank 0; s0=$?; wait $p1; echo status0=$s0 status1=$?)");
  EXPECT_TRUE(contains(run.out, "status0=0 status1=0")) << run.out;
  EXPECT_TRUE(contains(run.out, "step matches the single-process reference")) << run.out;
}

TEST_F(Train, NodesThatDisagreeOnTheWorldSizeAreNamed) {
  // Node 0 thinks the job has 2 nodes (4 ranks); node 1 was told 3 nodes of 2 (6 ranks).
  const std::string port = a_free_port(3);
  const std::string common =
      std::string(DUALPIPE_BIN) + " " + kSmall + "--schedule 1f1b --steps 1 --timeout 3 --master-port " + port;
  const CommandResult run = run_command("(timeout 30 " + common + " --nnodes 2 --node-rank 0 & timeout 30 " + common +
                                        " --ranks 6 --nnodes 3 --node-rank 1; wait)");
  EXPECT_TRUE(contains(run.out, "was started with WORLD_SIZE 6, this rank with 4") ||
              contains(run.out, "was started with WORLD_SIZE 4, this rank with 6"))
      << run.out;
}

TEST_F(Train, TwoProcessesClaimingOneRankAreNamed) {
  const std::string env = "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + a_free_port(4) + " WORLD_SIZE=3 timeout 20 ";
  const std::string worker = kWorker + "--schedule 1f1b --ranks 3";
  const CommandResult run = run_command("(RANK=0 " + env + worker + " & RANK=1 " + env + worker + " & RANK=1 " + env +
                                        worker + "; wait)");
  EXPECT_TRUE(contains(run.out, "rank 1: two processes claim rank 1 (pid ")) << run.out;
  EXPECT_TRUE(contains(run.out, "give every process its own RANK")) << run.out;
}

TEST_F(Train, AnUnreachableMasterAddressIsNamedWithinTheTimeout) {
  // 192.0.2.1 is TEST-NET-1 (RFC 5737): never routed to a host.
  const std::string port = a_free_port(5);
  const CommandResult run = dualpipe_cmd(kSmall + "--steps 1 --timeout 3 --nnodes 2 --node-rank 1 "
                                         "--master-addr 192.0.2.1 --master-port " + port, 30);
  EXPECT_EQ(run.status, 1) << run.out;
  EXPECT_TRUE(contains(run.out, "cannot reach rank 0's rendezvous store at 192.0.2.1:" + port + " within 3 s"))
      << run.out;
}

}  // namespace
