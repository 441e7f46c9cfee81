// `dualpipe train` across two emulated machines: network namespaces joined by a veth pair with a bandwidth limit
// (scripts/testbed.sh). Ranks 0-1 run in one namespace, 2-3 in the other, each node started by its own
// `dualpipe train --nnodes 2 --node-rank K`. The references: a local run of the same job (losses bit-identical),
// a link taken down by the test (every rank on both sides fails within the timeout naming a peer, and no process
// is left in either namespace), and a node the test never starts (its ranks are named). Skipped, saying why,
// where namespaces cannot be made (not root, no iproute2).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>

#include "cli/train_fixture.h"

namespace {

using namespace dualpipe::test;

const std::string kTestbed = std::string(DUALPIPE_SOURCE_DIR) + "/scripts/testbed.sh";

// "status0=S status1=S" of both nodes run at once.
std::string both(const std::string& node0, const std::string& node1) {
  return "(" + node0 + " & p0=$!; " + node1 + "; s1=$?; wait $p0; echo status0=$? status1=$s1)";
}

class TwoNodes : public Train {
 protected:
  void SetUp() override {
    Train::SetUp();
    if (IsSkipped()) return;
    const CommandResult check = run_command(kTestbed + " check");
    if (check.status == 77) GTEST_SKIP() << "no two-node test bed here: " << check.out;
    ASSERT_EQ(check.status, 0) << check.out;
    // The whole pid (at most 7 digits; names allow 10 characters): unique among the processes running tests.
    const std::string name = "dpt" + std::to_string(::getpid());
    const CommandResult up = run_command(kTestbed + " up " + name + " --rate 1gbit");
    ASSERT_EQ(up.status, 0) << "testbed.sh up " << name << " failed:\n" << up.out;
    name_ = name;  // ours to remove only once made: a failed `up` removed what it made itself
    // Line by line and by name ("nodeK ns=NS addr=ADDR if=IF"): the output holds stderr too, whose words must
    // never be read as fields (issue 27).
    std::istringstream lines(up.out);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream words(line);
      std::string role, word;
      words >> role;
      if (role != "node0" && role != "node1") continue;
      const int k = role == "node0" ? 0 : 1;
      while (words >> word) {
        if (word.rfind("ns=", 0) == 0) namespace_[k] = word.substr(3);
        if (word.rfind("addr=", 0) == 0) address_[k] = word.substr(5);
      }
    }
    for (int k : {0, 1}) {
      const std::string ns = name + "-n" + std::to_string(k);
      ASSERT_TRUE(namespace_[k] == ns && !address_[k].empty())
          << "no line 'node" << k << " ns=" << ns << " addr=...' in the output of testbed.sh up:\n" << up.out;
    }
  }
  void TearDown() override {
    if (!name_.empty()) {
      const CommandResult down = run_command(kTestbed + " down " + name_);
      EXPECT_EQ(down.status, 0) << down.out;
    }
    Train::TearDown();
  }

  // Node K's share of a 4-rank job, as a shell command run inside its namespace; its output goes to LOG.
  std::string node(int k, const std::string& options, const std::string& log) const {
    return "ip netns exec " + namespace_[k] + " timeout -k 5 120 " + DUALPIPE_BIN + " " + kSmall + options +
           " --nnodes 2 --node-rank " + std::to_string(k) + " --master-addr " + address_[0] + " --master-port 29400 > '" +
           path(log) + "' 2>&1";
  }

  // Runs `job` locally and split over the two nodes, expects the same losses and gradient norms bit for bit, and
  // returns both nodes' output.
  std::string expect_like_the_local_run(const std::string& job) const {
    const CommandResult local = dualpipe_cmd(kSmall + job + " --metrics " + path("local.jsonl"), 120);
    EXPECT_EQ(local.status, 0) << local.out;
    const CommandResult run = run_command(both(node(0, job + " --metrics " + path("two.jsonl"), "n0.log"),
                                               node(1, job, "n1.log")));
    const std::string n0 = read_file(path("n0.log")), n1 = read_file(path("n1.log"));
    EXPECT_TRUE(contains(run.out, "status0=0 status1=0")) << run.out << n0 << n1;
    const MetricsFile expected = read_metrics(path("local.jsonl")), got = read_metrics(path("two.jsonl"));
    EXPECT_EQ(expected.steps.size(), 3u);
    EXPECT_EQ(got.steps.size(), expected.steps.size()) << n0;
    for (std::size_t i = 0; i < std::min(expected.steps.size(), got.steps.size()); ++i) {
      EXPECT_EQ(got.steps[i]["loss"], expected.steps[i]["loss"]) << "step " << i + 1;
      EXPECT_EQ(got.steps[i]["grad_norm"], expected.steps[i]["grad_norm"]) << "step " << i + 1;
    }
    return n0 + n1;
  }

  // The processes still running in node K's namespace.
  std::string processes_in(int k) const { return run_command("ip netns pids " + namespace_[k]).out; }

  std::string name_, namespace_[2], address_[2];
};

TEST_F(TwoNodes, FourRanksSplitTwoAndTwoTrainWithTheLocalRunsLosses) {
  const std::string out = expect_like_the_local_run("--schedule dualpipe --steps 3 --eval-every 0 --sample-tokens 0");
  EXPECT_TRUE(contains(out, "node 0 of 2: ranks 0-1 of 4, MASTER_ADDR=" + address_[0])) << out;
  EXPECT_TRUE(contains(out, "node 1 of 2: ranks 2-3 of 4, MASTER_ADDR=" + address_[0])) << out;
}

TEST_F(TwoNodes, TorchrunOnEachNodeTrainsWithTheLocalRunsLosses) {
  // PyTorch 2's torchrun, 2 x 2: each namespace runs `torchrun --nnodes 2 --node-rank K --nproc-per-node 2`, node 0's
  // agent hosting the store; the workers are `dualpipe-train-worker`.
  const std::string torchrun = find_torchrun();
  if (torchrun.empty()) GTEST_SKIP() << "no torchrun: run scripts/setup.sh (PyTorch 2 into $DUALPIPE_VENV)";
  const std::string job = "--schedule dualpipe --steps 3 --eval-every 0 --sample-tokens 0";
  const CommandResult local = dualpipe_cmd(kSmall + job + " --metrics " + path("local.jsonl"), 120);
  ASSERT_EQ(local.status, 0) << local.out;
  const std::string options = kSmall.substr(std::string("train ").size()) + job;
  auto torchrun_node = [&](int k, const std::string& extra, const std::string& log) {
    return "ip netns exec " + namespace_[k] + " env OMP_NUM_THREADS=1 timeout -k 5 180 " + torchrun +
           " --no-python --nnodes 2 --node-rank " + std::to_string(k) + " --nproc-per-node 2 --master-addr " +
           address_[0] + " --master-port 29401 " + worker_binary() + " " + options + extra + " > '" + path(log) +
           "' 2>&1";
  };
  const CommandResult run = run_command(both(torchrun_node(0, " --metrics " + path("two.jsonl"), "n0.log"),
                                             torchrun_node(1, "", "n1.log")));
  const std::string n0 = read_file(path("n0.log")), n1 = read_file(path("n1.log"));
  ASSERT_TRUE(contains(run.out, "status0=0 status1=0")) << run.out << n0 << n1;
  const MetricsFile expected = read_metrics(path("local.jsonl")), got = read_metrics(path("two.jsonl"));
  ASSERT_EQ(expected.steps.size(), 3u);
  ASSERT_EQ(got.steps.size(), 3u) << n0;
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(got.steps[i]["loss"], expected.steps[i]["loss"]) << "step " << i + 1;
    EXPECT_EQ(got.steps[i]["grad_norm"], expected.steps[i]["grad_norm"]) << "step " << i + 1;
  }
}

TEST_F(TwoNodes, DataParallelReplicasOnTwoNodesTrainLikeTheLocalRun) {
  // --pp 2 --dp 2: each node holds one whole pipeline (ranks 0-1 and 2-3), the gradient all-reduce crosses the link.
  const std::string out =
      expect_like_the_local_run("--schedule 1f1b --pp 2 --dp 2 -m 4 --steps 3 --eval-every 0 --sample-tokens 0");
  EXPECT_TRUE(contains(out, "data-parallel replicas identical")) << out;
}

TEST_F(TwoNodes, ExpertParallelAllToAllsAcrossTheLinkTrainLikeTheLocalRun) {
  // --pp 2 --dp 2 --ep 2: one pipeline per node, so every dispatch and combine all-to-all crosses the link.
  const std::string out = expect_like_the_local_run(
      "--schedule dualpipe --pp 2 --dp 2 --ep 2 --experts 4 -m 4 --steps 3 --eval-every 0 --sample-tokens 0");
  EXPECT_TRUE(contains(out, "experts sharded over expert-parallel groups of 2")) << out;
  EXPECT_TRUE(contains(out, "step matches the single-process reference")) << out;
}

TEST_F(TwoNodes, ALinkTakenDownMidRunFailsEveryRankOnBothSidesNamingAPeer) {
  const std::string job = "--schedule 1f1b --steps 100000 --eval-every 0 --sample-tokens 0 --timeout 5";
  const std::string start = both(node(0, job, "n0.log"), node(1, job, "n1.log"));
  const std::string marker = path("link-down-at");
  // Take the link down once node 0 printed step 2, and note when.
  const std::string saboteur = "(while ! grep -q '^\\[rank 0\\]     2 ' '" + path("n0.log") +
                               "' 2>/dev/null; do sleep 0.1; done; " + kTestbed + " link " + name_ +
                               " down; date +%s.%N > '" + marker + "')";
  const CommandResult run = run_command("(" + saboteur + " & " + start + "; date +%s.%N)");
  const std::string n0 = read_file(path("n0.log")), n1 = read_file(path("n1.log"));
  EXPECT_TRUE(contains(run.out, "status0=1 status1=1")) << run.out << n0 << n1;
  ASSERT_FALSE(read_file(marker).empty()) << "the run never reached step 2\n" << n0 << n1;
  const double down_at = std::stod(read_file(marker));
  const double ended_at = std::stod(run.out.substr(run.out.rfind('\n', run.out.size() - 2) + 1));
  // A hang check, not a performance figure: the heartbeat timeout is 5 s; everything must be over well before
  // timeout's 120 s.
  EXPECT_LT(ended_at - down_at, 60) << n0 << n1;
  // Each side names a rank of the other side as the one it lost.
  EXPECT_TRUE(contains(n0, "rank 2 stopped responding") || contains(n0, "rank 3 stopped responding")) << n0;
  EXPECT_TRUE(contains(n1, "rank 0 stopped responding") || contains(n1, "rank 1 stopped responding")) << n1;
  EXPECT_TRUE(contains(n0, "dualpipe launch: rank ")) << n0;
  EXPECT_TRUE(contains(n1, "dualpipe launch: rank ")) << n1;
  EXPECT_EQ(processes_in(0), "");
  EXPECT_EQ(processes_in(1), "");
}

TEST_F(TwoNodes, ANodeThatNeverArrivesFailsTheRendezvousNamingItsRanks) {
  const CommandResult run =
      run_command(node(0, "--schedule 1f1b --steps 1 --timeout 3", "n0.log") + "; echo status=$?");
  const std::string n0 = read_file(path("n0.log"));
  EXPECT_TRUE(contains(run.out, "status=1")) << run.out << n0;
  EXPECT_TRUE(contains(n0, "ranks 2, 3 of 4 never arrived at the rendezvous at " + address_[0] + ":29400 within 3 s"))
      << n0;
  EXPECT_EQ(processes_in(0), "");
}

}  // namespace
