// `dualpipe train --emulate-device COSTS --emulate-link-rate RATE`: every stage's MoE layers take the simulator's
// costs by sleeping on one emulated device per rank, and their exchanges are padded to the sizes that take a2a's
// time at the rate. The real maths still runs, so each schedule's losses, gradient norms and routing must be
// those of the same run without emulation, bit for bit (the reference), and the sleeps must have been taken.
#include <gtest/gtest.h>

#include <string>

#include "cli/train_fixture.h"

namespace {

using namespace dualpipe::test;

const std::string kEmulatedMoe =
    kSmall + "--steps 2 --eval-every 0 --sample-tokens 0 --experts 4 --top-k 2 --dp 2 --ep 2 -m 4 --pp 2 ";
// Per stage: F 4 ms, I 4 ms, W 2 ms; a2a 4 ms, at 100 Mbit/s 50,000 bytes per stage's forward.
const std::string kEmulation = " --emulate-device F=4,B=6,W=2,a2a=4 --emulate-link-rate 100mbit";

// One test per schedule (the sanitized suite keeps DualPipe's alone: scripts/test_sanitized.sh).
class EmulatedDevice : public Train, public ::testing::WithParamInterface<const char*> {};

TEST_P(EmulatedDevice, StagesTrainLikeTheRealStagesBitForBit) {
  const std::string schedule = GetParam();
  const std::string job = kEmulatedMoe + "--schedule " + schedule + " --metrics ";
  const CommandResult real = dualpipe_cmd(job + path("real.jsonl"), 120);
  ASSERT_EQ(real.status, 0) << real.out;
  const CommandResult emulated = dualpipe_cmd(job + path("emulated.jsonl") + kEmulation, 120);
  ASSERT_EQ(emulated.status, 0) << emulated.out;
  EXPECT_TRUE(contains(emulated.out, "emulated device: every stage's MoE layers sleep")) << emulated.out;
  const MetricsFile a = read_metrics(path("real.jsonl")), b = read_metrics(path("emulated.jsonl"));
  ASSERT_EQ(a.steps.size(), 2u);
  ASSERT_EQ(b.steps.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    for (const char* field : {"loss", "grad_norm", "moe_aux_loss", "moe_dropped"})
      EXPECT_EQ(b.steps[i][field], a.steps[i][field]) << schedule << " step " << i + 1 << " " << field;
    // Not a speed limit: the sleeps alone take this long. Every rank runs a forward and a backward (F + B =
    // 10 ms of sleeping, the costs being per stage) for at least 4 (stage, micro-batch) pairs a step.
    EXPECT_GE(b.steps[i]["step_ms"].get<double>(), 40.0) << schedule;
  }
}

// "zb_h1": a name GoogleTest accepts.
std::string schedule_name(const ::testing::TestParamInfo<const char*>& info) {
  std::string name = info.param;
  for (char& ch : name)
    if (ch == '-') ch = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Schedules, EmulatedDevice, ::testing::Values("dualpipe", "dualpipev", "1f1b", "zb-h1", "zbv"),
                         schedule_name);

TEST_F(Train, EmulatedDeviceOptionsAreCheckedWithTheRule) {
  const struct {
    std::string args, rule;
  } bad[] = {
      {kSmall + "--steps 1 --pp 2 -m 4 --emulate-device F=1", "--emulate-device emulates the compute of MoE layers"},
      {kEmulatedMoe + "--emulate-device F=1,FB=2", "sets FB or comm, which the run measures"},
      {kEmulatedMoe + "--emulate-device F=1,B=2,W=3", "W <= B"},
      {kEmulatedMoe + "--emulate-device F=1,a2a=2", "a2a needs --emulate-link-rate"},
      {kEmulatedMoe + "--emulate-device F=1,a2a=2 --emulate-link-rate 100mb", "must be a rate written like 100mbit"},
      {kEmulatedMoe + "--emulate-link-rate 100mbit", "--emulate-link-rate needs --emulate-device"},
      {kSmall + "--steps 1 --pp 2 -m 4 --experts 4 --emulate-device a2a=2 --emulate-link-rate 1gbit",
       "a2a needs expert parallelism (--ep above 1)"},
  };
  for (const auto& [args, rule] : bad) {
    const CommandResult r = dualpipe_cmd(args, 30);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_TRUE(contains(r.out, rule)) << args << "\n" << r.out;
  }
}

}  // namespace
