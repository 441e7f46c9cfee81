// The schedule pipeline's speed: generate, validate, lower and simulate DualPipe.
//
//   build/bench_schedule                       all cases, then the doubling ratios
//   build/bench_schedule --benchmark_filter=R64
//
// Target (issue 2): the whole pipeline for R=64, M=1024 (about 130k actions) under 50 ms, with time linear
// in the number of actions: the M=1024 / M=512 ratio printed at the end should be close to 2.
// Target (issue 12): a planner search (plan_schedule) for p=32, m=96 at the Zero Bubble paper's 28.3B setting
// (ZB-2p: memory 2p, objective span) in 50 ms or less, time and memory linear in the schedule (m=96 -> 192).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/lower.h"
#include "dualpipe/schedule/validate.h"
#include "dualpipe/sim/planner.h"
#include "dualpipe/sim/simulate.h"

namespace {

using namespace dualpipe;

Schedule generate(int R, int M) { return make_dualpipe({R, M, 0}); }

// F, B, I and W actions, an overlapped pair counting as its two halves: the work the pipeline handles.
std::size_t count_units(const Schedule& s) {
  std::size_t units = 0;
  for (const auto& actions : s.actions) {
    for (const Action& a : actions) units += a.type == ActionType::Overlapped ? 2 : 1;
  }
  return units;
}

void BM_Pipeline(benchmark::State& state) {
  const int R = static_cast<int>(state.range(0)), M = static_cast<int>(state.range(1));
  std::size_t actions = 0;
  for (auto _ : state) {
    Schedule s = generate(R, M);
    validate(s);
    Schedule lowered = lower_communication(s);
    Simulation sim = simulate(s, CostModel{});
    benchmark::DoNotOptimize(sim.metrics.bubble);
    benchmark::DoNotOptimize(lowered.actions.data());
    actions = count_units(s);
  }
  state.counters["actions"] = static_cast<double>(actions);
  state.counters["per_action"] = benchmark::Counter(static_cast<double>(actions) * state.iterations(),
                                                    benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// The parts, for seeing where the time goes.
void BM_Generate(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(generate(64, 1024).actions.data());
}
void BM_Validate(benchmark::State& state) {
  const Schedule s = generate(64, 1024);
  for (auto _ : state) validate(s);
}
void BM_Lower(benchmark::State& state) {
  const Schedule s = generate(64, 1024);
  for (auto _ : state) benchmark::DoNotOptimize(lower_communication(s).actions.data());
}
void BM_Simulate(benchmark::State& state) {
  const Schedule s = generate(64, 1024);
  for (auto _ : state) benchmark::DoNotOptimize(simulate(s, CostModel{}).metrics.bubble);
}

// The planner at the Zero Bubble paper's 28.3B setting (its Table 9: T_F, T_B, T_W, T_comm; our B = T_B + T_W).
PlanRequest zero_bubble_request(int M, bool linear_only) {
  PlanRequest q;
  q.num_ranks = 32;
  q.num_microbatches = M;
  q.costs = CostModel::parse("F=10.419,B=17.922,W=7.715,comm=0.408,w_mem=0.432");
  q.memory_limit = 64;
  q.objective = PlanObjective::Span;
  if (linear_only) q.placements = {"linear"};
  return q;
}

void BM_Plan(benchmark::State& state) {
  const PlanRequest q = zero_bubble_request(static_cast<int>(state.range(0)), state.range(1) != 0);
  double bytes = 0, evaluated = 0;
  for (auto _ : state) {
    const Plan plan = plan_schedule(q);
    // What the plan holds: every candidate's action lists (the search holds at most one schedule per placement
    // and policy under trial on top of these).
    bytes = 0;
    for (const PlanCandidate& c : plan.candidates)
      for (const auto& actions : c.schedule.actions) bytes += static_cast<double>(actions.size() * sizeof(Action));
    evaluated = plan.evaluated;
    benchmark::DoNotOptimize(plan.best.score);
  }
  state.counters["schedules"] = evaluated;
  state.counters["bytes_held"] = bytes;
}

BENCHMARK(BM_Plan)->Name("Plan/ZB28B_p32_m96")->Args({96, 0})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Plan)->Name("Plan/ZB28B_p32_m192")->Args({192, 0})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Plan)->Name("Plan/ZB28B_p32_m96_linear")->Args({96, 1})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Plan)->Name("Plan/ZB28B_p32_m192_linear")->Args({192, 1})->Unit(benchmark::kMillisecond);

BENCHMARK(BM_Pipeline)->Name("Pipeline/R16_M128")->Args({16, 128})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Pipeline)->Name("Pipeline/R64_M512")->Args({64, 512})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Pipeline)->Name("Pipeline/R64_M1024")->Args({64, 1024})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Generate)->Name("Part/Generate_R64_M1024")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Validate)->Name("Part/Validate_R64_M1024")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Lower)->Name("Part/Lower_R64_M1024")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Simulate)->Name("Part/Simulate_R64_M1024")->Unit(benchmark::kMillisecond);

// Remembers each run's time so the ratios can be printed after the table.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.run_type == Run::RT_Aggregate && run.aggregate_name != "median") continue;
      times_[run.run_name.function_name] = run.GetAdjustedRealTime();
      const auto found = run.counters.find("actions");
      if (found != run.counters.end()) actions_[run.run_name.function_name] = found->second.value;
      const auto held = run.counters.find("bytes_held");
      if (held != run.counters.end()) bytes_[run.run_name.function_name] = held->second.value;
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void print_ratios() const {
    const auto half = times_.find("Pipeline/R64_M512"), full = times_.find("Pipeline/R64_M1024");
    if (half != times_.end() && full != times_.end()) {
      const double work = actions_.at("Pipeline/R64_M1024") / actions_.at("Pipeline/R64_M512");
      std::printf("\nR=64, M=512 -> M=1024: actions x%.2f, time x%.2f (linear when the two are equal)\n", work,
                  full->second / half->second);
      std::printf("R=64, M=1024 whole pipeline: %.1f ms (target < 50 ms)\n", full->second);
    }
    for (const char* suffix : {"", "_linear"}) {
      const std::string a = std::string("Plan/ZB28B_p32_m96") + suffix, b = std::string("Plan/ZB28B_p32_m192") + suffix;
      const auto p96 = times_.find(a), p192 = times_.find(b);
      if (p96 == times_.end() || p192 == times_.end()) continue;
      std::printf("\nplan p=32, m=96%s: %.1f ms (target <= 50 ms); m=96 -> 192: time x%.2f, bytes held x%.2f "
                  "(linear: 2)", suffix, p96->second, p192->second / p96->second, bytes_.at(b) / bytes_.at(a));
    }
    std::printf("\n");
  }

 private:
  std::map<std::string, double> times_;
  std::map<std::string, double> actions_;
  std::map<std::string, double> bytes_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_ratios();
  benchmark::Shutdown();
  return 0;
}
