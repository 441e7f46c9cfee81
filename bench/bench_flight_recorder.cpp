// What the flight recorder (runtime/flight_recorder.h) costs the executor: the records of one action that waits for
// one message (start, wait, received, end) and of one that sends one, timed by google benchmark, and that cost as a
// share of an action of the emulated device (issue 75 asks for at most 1% of the step there). Every action of a step
// pays it once, so the share of an action is the share of the step.
//
//   build/bench_flight_recorder [--action-ms 20]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "dualpipe/runtime/flight_recorder.h"

namespace {

using dualpipe::Action;
using dualpipe::ActionType;
using dualpipe::runtime::FlightRecorder;

void ActionWaitingForAMessage(benchmark::State& state) {
  FlightRecorder recorder;
  recorder.step_started(0, "1f1b, 4 ranks, 8 micro-batches", 7);
  const Action recv = Action::communication(ActionType::RecvForward, 1, 3, 0);
  const Action message = Action::communication(ActionType::SendForward, 0, 3, -1);
  for (auto _ : state) {
    recorder.action_started(5, recv);
    recorder.waiting_for(message, 0, true, 3);
    recorder.message_received(4096);
    recorder.action_ended();
  }
}
BENCHMARK(ActionWaitingForAMessage);

void ActionSendingAMessage(benchmark::State& state) {
  FlightRecorder recorder;
  recorder.step_started(0, "1f1b, 4 ranks, 8 micro-batches", 7);
  const Action send = Action::communication(ActionType::SendForward, 0, 3, 1);
  for (auto _ : state) {
    recorder.action_started(4, send);
    recorder.message_sent(send, 1, 4096);
    recorder.action_ended();
  }
}
BENCHMARK(ActionSendingAMessage);

// Prints each case's cost as a share of an emulated action of `action_ms`.
class ShareReporter : public benchmark::ConsoleReporter {
 public:
  explicit ShareReporter(double action_ms) : action_ms_(action_ms) {}
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.aggregate_name == "stddev" || r.aggregate_name == "cv") continue;  // not times
      const double ns = r.GetAdjustedRealTime();  // in the run's time unit, nanoseconds by default
      std::printf("  %s: %.0f ns per action = %.5f%% of a %.0f ms emulated action\n", r.benchmark_name().c_str(), ns,
                  100.0 * ns / (action_ms_ * 1e6), action_ms_);
    }
  }

 private:
  double action_ms_;
};

}  // namespace

int main(int argc, char** argv) {
  double action_ms = 20;  // bench_emulated_device.py's smallest cost, F=20 (docs/benchmarks.md)
  std::vector<char*> rest = {argv[0]};  // google benchmark's own flags
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--action-ms") == 0 && i + 1 < argc) {
      action_ms = std::atof(argv[++i]);
    } else {
      rest.push_back(argv[i]);
    }
  }
  int rest_count = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_count, rest.data());
  ShareReporter reporter(action_ms);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  return 0;
}
