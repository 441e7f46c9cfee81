// The worker started by PyTorch 2's own torchrun (the one scripts/setup.sh installs with the pinned PyTorch):
// `torchrun --nproc-per-node 4 dualpipe-train-worker OPTIONS` must train with the losses of `dualpipe train
// OPTIONS`, bit for bit. torchrun's agent hosts the rendezvous store and sets the workers' variables; the worker
// finds everything in them (comm/launch_environment.h). Skipped where no torchrun is found.
#include <gtest/gtest.h>

#include <string>

#include "cli/free_port.h"
#include "cli/train_fixture.h"

namespace {

using namespace dualpipe::test;

std::vector<double> losses(const MetricsFile& m) {
  std::vector<double> out;
  for (const auto& s : m.steps) out.push_back(s["loss"].get<double>());
  return out;
}

TEST_F(Train, TorchrunWithFourLocalRanksTrainsWithTheLossesOfDualpipeTrain) {
  const std::string torchrun = find_torchrun();
  if (torchrun.empty()) GTEST_SKIP() << "no torchrun: run scripts/setup.sh (PyTorch 2 into $DUALPIPE_VENV)";
  // The options after `train`, as both launchers take them: DualPipe on 4 ranks, 3 steps.
  const std::string options = kSmall.substr(std::string("train ").size()) +
                              "--schedule dualpipe --ranks 4 --steps 3 --eval-every 0 --sample-tokens 0 --timeout 60 ";
  const CommandResult ours = dualpipe_cmd("train " + options + "--metrics " + path("ours.jsonl"), 240);
  ASSERT_EQ(ours.status, 0) << ours.out;
  const CommandResult theirs = run_command(
      "env -u RANK -u WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT -u LOCAL_RANK OMP_NUM_THREADS=1 timeout -k 5 240 " +
      torchrun + " --no-python --nproc-per-node 4 --master-addr 127.0.0.1 --master-port " + a_free_port(11) + " " +
      worker_binary() + " " + options + "--metrics " + path("theirs.jsonl") + " 2>&1");
  ASSERT_EQ(theirs.status, 0) << theirs.out;
  EXPECT_TRUE(contains(theirs.out, "step matches the single-process reference")) << theirs.out;
  const MetricsFile a = read_metrics(path("ours.jsonl")), b = read_metrics(path("theirs.jsonl"));
  ASSERT_EQ(a.steps.size(), 3u);
  EXPECT_EQ(losses(b), losses(a));  // exact: full-precision JSON numbers
  EXPECT_EQ(b.evals.back()["val_loss"], a.evals.back()["val_loss"]);
}

}  // namespace
