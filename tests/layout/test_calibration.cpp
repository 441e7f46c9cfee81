// The time model on this machine: ranks sharing host cores, and calibration on a traced run.
#include <gtest/gtest.h>

#include "dualpipe/layout/calibration.h"
#include "dualpipe/layout/layout.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/util/error.h"
#include "layout/pipeline_costs.h"

namespace dualpipe::layout {
namespace {

// dualpipe train's default model with its MoE option, as a layout model (4-byte parameters: the CPU trains fp32).
ModelSpec trainer_model() {
  return parse_model_spec(R"({"name": "small-moe", "layers": 8, "hidden": 128, "heads": 4, "ffn_hidden": 512,
                              "vocab": 256, "seq_len": 128, "experts": 4, "top_k": 2, "expert_ffn_hidden": 512,
                              "dtype_bytes": 4})",
                          "small-moe.json");
}

ClusterSpec cpu_cluster(int gpus, int cores) {
  ClusterSpec c;
  c.name = "cpu", c.gpus = c.gpus_per_node = gpus, c.memory_gib = 20, c.reserved_gib = 1;
  c.peak_tflops = 0.2, c.intra_node_gbps = c.inter_node_gbps = 2, c.host_cores = cores;
  return c;
}

Layout fixed(int pp, int dp, const std::string& schedule) {
  Layout l;
  l.pp = pp, l.dp = dp, l.schedule = schedule, l.micro_batch_size = 2, l.recompute = Recompute::None, l.zero = 0;
  return l;
}

TEST(SharedCores, AsManyCoresAsRanksChangesNothing) {
  const ModelSpec model = trainer_model();
  for (const std::string kind : {"1f1b", "zb-h1", "dualpipev", "dualpipe"}) {
    const double own = evaluate_layout(model, cpu_cluster(4, 0), 16, fixed(4, 1, kind)).time.step;
    const double shared = evaluate_layout(model, cpu_cluster(4, 4), 16, fixed(4, 1, kind)).time.step;
    EXPECT_NEAR(shared, own, 1e-9 * own) << kind;
  }
}

// With one core, some rank can always run (no deadlock, no latency), so the core never idles: the step is the
// whole pipeline's compute, done one piece at a time.
TEST(SharedCores, OneCoreTakesTheSumOfAllWork) {
  const ModelSpec model = trainer_model();
  ClusterSpec own = cpu_cluster(2, 0);
  own.intra_node_gbps = own.inter_node_gbps = 1e9;  // no message latency: the core is never left idle
  ClusterSpec one_core = own;
  one_core.host_cores = 1;
  for (const std::string kind : {"1f1b", "zb-h1", "dualpipev"}) {
    const LayoutResult alone = evaluate_layout(model, own, 64, fixed(2, 1, kind));
    const double work = 2 * alone.time.compute;  // two ranks, each busy this long (equal stages)
    const double step = evaluate_layout(model, one_core, 64, fixed(2, 1, kind)).time.step;
    EXPECT_NEAR(step, work, 0.03 * work) << kind;
    EXPECT_GT(step, alone.time.step * 1.5) << kind;
  }
}

// Data-parallel replicas without a pipeline each run all the time: 4 of them on 2 cores take twice as long.
TEST(SharedCores, ReplicasBeyondTheCoresSlowDownInProportion) {
  const ModelSpec model = trainer_model();
  Layout l = fixed(1, 4, "none");
  const double four = evaluate_layout(model, cpu_cluster(4, 4), 16, l).time.step;
  const double two = evaluate_layout(model, cpu_cluster(4, 2), 16, l).time.step;
  EXPECT_NEAR(two, 2 * four, 1e-9 * four);
}

// A run of 2 ranks, 1F1B over 2 micro-batches, each stage's F taking f and B taking 2f microseconds; steps
// `period` apart.
Trace one_f_one_b_trace(double f, double period, int steps) {
  Trace t;
  t.kind = "1f1b", t.num_ranks = 2, t.num_stages = 2, t.num_microbatches = 2;
  for (int step = 1; step <= steps; ++step) {
    const double t0 = (step - 1) * period;
    // rank 0: F0 F1 B0 B1; rank 1: F0 B0 F1 B1, as 1F1B runs them (stages of equal cost).
    const double r1_f0 = t0 + f, r1_b0 = r1_f0 + f, r0_b0 = r1_b0 + 2 * f, r1_f1 = r1_b0 + 2 * f;
    const double r1_b1 = r1_f1 + f, r0_b1 = r1_b1 + 2 * f;
    const std::vector<TraceEvent> events{
        {Action::forward(0, 0), 0, 0, step, t0, f},          {Action::forward(0, 1), 0, 1, step, t0 + f, f},
        {Action::backward(0, 0), 0, 2, step, r0_b0, 2 * f}, {Action::backward(0, 1), 0, 3, step, r0_b1, 2 * f},
        {Action::forward(1, 0), 1, 0, step, r1_f0, f},       {Action::backward(1, 0), 1, 1, step, r1_b0, 2 * f},
        {Action::forward(1, 1), 1, 2, step, r1_f1, f},       {Action::backward(1, 1), 1, 3, step, r1_b1, 2 * f}};
    t.events.insert(t.events.end(), events.begin(), events.end());
  }
  return t;
}

TEST(Calibrate, TheRateFollowsTheMeasuredTime) {
  const ModelSpec model = trainer_model();
  ClusterSpec a = cpu_cluster(2, 2), b = cpu_cluster(2, 2), c = cpu_cluster(2, 2);
  c.matmul_efficiency = c.attention_efficiency = 0.3;  // another stated rate: the same measured rate
  const Calibration fast = calibrate(model, a, one_f_one_b_trace(20000, 200000, 4), 2, "fast.json");
  const Calibration slow = calibrate(model, b, one_f_one_b_trace(40000, 400000, 4), 2, "slow.json");
  const Calibration stated = calibrate(model, c, one_f_one_b_trace(20000, 200000, 4), 2, "fast.json");
  EXPECT_NEAR(fast.measured_seconds, 2 * (0.02 + 0.04), 1e-12);
  EXPECT_EQ(fast.steps, 3);  // the first step is left out
  EXPECT_NEAR(slow.matmul_efficiency, fast.matmul_efficiency / 2, 1e-12);
  EXPECT_NEAR(stated.matmul_efficiency, fast.matmul_efficiency, 1e-12);
  EXPECT_EQ(a.matmul_efficiency, fast.matmul_efficiency);
  EXPECT_EQ(fast.layout.pp, 2);
  EXPECT_EQ(fast.layout.schedule, "1f1b");
}

// The planner, calibrated, predicts the traced run's own compute and between-step time.
TEST(Calibrate, ThePlannerThenPredictsTheTracedRun) {
  const ModelSpec model = trainer_model();
  ClusterSpec cluster = cpu_cluster(2, 2);
  const double f = 20000, period = 200000;  // microseconds
  const Calibration cal = calibrate(model, cluster, one_f_one_b_trace(f, period, 5), 2, "run.json");
  const double span = 9 * f;  // stage 0's F0, then stage 1's F0, B0, F1, B1 (6f), then stage 0's B1 (2f)
  EXPECT_NEAR(cal.between_steps_seconds, (period - span) * 1e-6, 1e-9);
  const LayoutResult run = evaluate_layout(model, cluster, 4, fixed(2, 1, "1f1b"));
  EXPECT_NEAR(run.time.update, cal.between_steps_seconds, 1e-9);
  // Both stages took 3f per micro-batch; the model gives the last stage the output layer's share more.
  EXPECT_NEAR(run.time.compute, 2 * 3 * f * 1e-6, 0.15 * 2 * 3 * f * 1e-6);
}

// `dualpipe profile --kineto` measures a model in one process: its F and B, as a --cost string, calibrate the same
// rate as a pipelined run whose stages took those times between them.
TEST(Calibrate, ACostStringOfTheWholeModelGivesTheSameRate) {
  const ModelSpec model = trainer_model();
  ClusterSpec from_trace = cpu_cluster(2, 2), from_costs = cpu_cluster(2, 2);
  const double f = 20000;  // per stage of two: the whole model takes 2f forward and 4f backward
  const Calibration traced = calibrate(model, from_trace, one_f_one_b_trace(f, 200000, 4), 2, "run.json");
  const Calibration costed = calibrate_from_costs(model, from_costs, CostModel::parse("F=40000,B=80000"), 1, 2,
                                                  "F=40000,B=80000");
  EXPECT_NEAR(costed.matmul_efficiency, traced.matmul_efficiency, 1e-12);
  EXPECT_EQ(costed.steps, 0);
  EXPECT_EQ(from_costs.update_ns_per_parameter, 0);  // a cost string says nothing of the update
  const Calibration per_stage = calibrate_from_costs(model, from_costs, CostModel::parse("F=20000:20000,B=40000:40000"),
                                                     2, 2, "per stage");
  EXPECT_NEAR(per_stage.matmul_efficiency, traced.matmul_efficiency, 1e-12);
  try {
    calibrate_from_costs(model, from_costs, CostModel::parse("F=1:2:3,B=2:4:6"), 2, 2, "three values");
    FAIL() << "a list of 3 values for 2 stages was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("3"), std::string::npos) << e.what();
  }
  try {
    calibrate_from_costs(model, from_costs, CostModel::parse("F=1,B=2"), 9, 2, "F=1,B=2");
    FAIL() << "9 stages of an 8-layer model were accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("--calibrate-stages=9 must be between 1 and the 8 layers"), std::string::npos)
        << e.what();
  }
}

// On a GPU cluster the memory-bound work does not scale with the products' rate: the fitted efficiency is the one at
// which the model gives the measured F + B (checked on the model itself after the fit), not stated x modelled /
// measured.
TEST(Calibrate, OnAGpuTheFitSolvesForTheProductsRateAlone) {
  const ModelSpec model = model_spec("llama3-8b");
  ClusterSpec cluster = cluster_spec("h100-sxmx8");
  Layout l;
  l.micro_batch_size = 1, l.recompute = Recompute::None, l.zero = 0, l.schedule = "none";
  const CostModel stated = pipeline_costs(model, cluster, l, false).costs;
  const double stated_seconds = 1e6 * (stated.forward + stated.backward);
  const double measured_us = 1.25 * stated_seconds;  // a quarter slower than the datasheet's model
  const Calibration c = calibrate_from_costs(model, cluster, CostModel::parse(
      "F=" + std::to_string(measured_us / 3) + ",B=" + std::to_string(2 * measured_us / 3)), 1, 1, "measured");
  const CostModel fitted = pipeline_costs(model, cluster, l, false).costs;
  EXPECT_NEAR(1e6 * (fitted.forward + fitted.backward), measured_us, 1e-6 * measured_us);
  EXPECT_LT(c.matmul_efficiency, c.stated_efficiency / 1.25);  // the products slow more than the whole
}

TEST(Calibrate, RefusesATraceOfAnotherModel) {
  ModelSpec model = trainer_model();
  model.layers = 1;
  ClusterSpec cluster = cpu_cluster(2, 2);
  try {
    calibrate(model, cluster, one_f_one_b_trace(20000, 200000, 3), 2, "run.json");
    FAIL() << "a 2-stage run of a 1-layer model was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("2 stages, more than the 1 layers"), std::string::npos) << e.what();
  }
}

TEST(Calibrate, RefusesARateAbovePeak) {
  const ModelSpec model = trainer_model();
  ClusterSpec cluster = cpu_cluster(2, 2);
  cluster.peak_tflops = 1e-3;  // the least a cluster file may give (1 GFLOP/s)
  try {
    calibrate(model, cluster, one_f_one_b_trace(20000, 200000, 3), 2, "run.json");
    FAIL() << "a run faster than peak was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("peak_tflops is too low"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dualpipe::layout
