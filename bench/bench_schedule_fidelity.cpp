// Schedule fidelity (issue 4, item 5): do real steps take as long as the simulator says?
//
//   build/bench_schedule_fidelity                 R=4 and R=8, F=20 B=40 W=20 ms, 5 timed steps per schedule
//   build/bench_schedule_fidelity --ranks 4 --steps 9
//
// Stages sleep for fixed F, I = B - W and W times (bench/sleep_stage.h), so 8 processes fit on 2 cores; the
// times are those of one rank's 1/R of the model, so DualPipeV's 2R stages take half as long each. For
// 1f1b, zb-h1, dualpipe and dualpipev the program runs M = 2R micro-batches over Gloo/TCP, one process per
// rank, and prints the measured median step time (rank 0, barrier to barrier), the simulator's makespan for the
// same costs plus the measured one-way latency of a boundary tensor on every cross-rank dependency, their ratio
// (target <= 1.10), and the schedules ranked both ways (target: the same order).
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "dualpipe/comm/channels.h"
#include "dualpipe/comm/gloo_communicator.h"
#include "dualpipe/runtime/executor.h"
#include "dualpipe/schedule/generators.h"
#include "dualpipe/sim/simulate.h"
#include "options.h"
#include "rank_processes.h"
#include "sleep_stage.h"

namespace {

using namespace dualpipe;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// One-way latency of a boundary tensor between ranks 0 and 1: half the median round trip. As in a step, every
// receive is posted before the messages start to flow, in order, on one channel.
constexpr int kProbeTag = comm::application_tag(0);

double measure_latency_ms(comm::Communicator& communicator, const runtime::TensorSpec& spec) {
  const int rank = communicator.rank(), rounds = 220, peer = 1 - rank;
  if (rank > 1) return 0;
  auto options = torch::TensorOptions().dtype(spec.dtype);
  torch::Tensor message = torch::zeros(spec.shape, options);
  std::vector<torch::Tensor> buffers;
  std::vector<std::shared_ptr<comm::Work>> receives;
  for (int i = 0; i < rounds; ++i) {
    buffers.push_back(torch::empty(spec.shape, options));
    receives.push_back(communicator.irecv(buffers.back(), peer, kProbeTag));
  }
  std::vector<double> round_trips;
  for (int i = 0; i < rounds; ++i) {
    auto start = Clock::now();
    if (rank == 0) {
      communicator.isend(message, peer, kProbeTag)->wait(communicator.timeout());
      receives[i]->wait(communicator.timeout());
    } else {
      receives[i]->wait(communicator.timeout());
      communicator.isend(message, peer, kProbeTag)->wait(communicator.timeout());
    }
    if (i >= 20) round_trips.push_back(ms_since(start));
  }
  return bench::summarize(round_trips).median / 2;
}

struct Row {
  std::string kind;
  double measured = 0, simulated = 0;
};

int run_rank(int steps, double f_ms, double b_ms, double w_ms) {
  at::set_num_threads(1);
  auto communicator = comm::GlooCommunicator::from_environment(std::chrono::seconds(120));
  const int R = communicator->size(), rank = communicator->rank(), M = 2 * R;
  const runtime::TensorSpec spec{{2, 8}, torch::kFloat};
  const double latency = measure_latency_ms(*communicator, spec);
  communicator->barrier();
  auto us = [](double ms) { return std::chrono::microseconds(static_cast<int64_t>(ms * 1000)); };

  std::vector<Row> rows;
  for (const char* kind : {"1f1b", "zb-h1", "dualpipe", "dualpipev"}) {
    Schedule schedule = make_schedule(kind, {R, M});
    // The model stays fixed: a schedule that cuts it into S > R stages (DualPipeV: 2R) gets stages R/S as long,
    // as in `dualpipe simulate --compare`.
    const double scale = static_cast<double>(R) / schedule.num_stages;
    const bench::SleepCosts sleeps{us(f_ms * scale), us((b_ms - w_ms) * scale), us(w_ms * scale)};
    std::map<int, std::shared_ptr<runtime::Stage>> stages;
    for (int s = 0; s < schedule.num_stages; ++s)
      for (int m = 0; m < M; ++m)
        if (schedule.placement.rank(s, m) == rank) stages[s] = std::make_shared<bench::SleepStage>(sleeps);
    runtime::ExecutorOptions options;
    options.boundaries = runtime::ExecutorOptions::uniform({spec}, schedule.num_stages);
    runtime::Executor executor(schedule, stages, communicator, options);
    runtime::StepArgs args;
    args.num_microbatches = M;
    const auto entering = static_cast<int64_t>(executor.entering_microbatches().size());
    const auto losses = static_cast<int64_t>(executor.loss_microbatches().size());
    // Inputs that ask for a gradient, so that stage 0's backward sleeps I like every other stage's (the
    // simulator charges I = B - W to every stage).
    for (int64_t i = 0; i < entering; ++i) args.microbatch_inputs.push_back({torch::zeros(spec.shape).requires_grad_()});
    if (losses > 0) args.labels = {torch::zeros({losses * spec.shape[0], spec.shape[1]})};
    args.criterion = runtime::single_tensor_criterion(
        [](const torch::Tensor& o, const torch::Tensor& l) { return torch::mse_loss(o, l); });
    std::vector<double> times;
    for (int i = 0; i < 1 + steps; ++i) {
      communicator->barrier();
      auto start = Clock::now();
      executor.step(args);
      communicator->barrier();
      if (i > 0) times.push_back(ms_since(start));
    }
    CostModel costs;
    costs.forward = f_ms * scale;
    costs.backward = b_ms * scale;
    costs.weight = w_ms * scale;
    costs.comm = latency;
    rows.push_back({kind, bench::summarize(times).median, simulate(schedule, costs).metrics.makespan});
  }
  communicator->barrier();
  if (rank != 0) return 0;

  std::printf("R=%d M=%d  (F=%g B=%g W=%g ms per 1/R of the model, measured one-way latency %.3f ms, %d timed steps per schedule)\n", R, M,
              f_ms, b_ms, w_ms, latency, steps);
  std::printf("  schedule    measured ms  simulated ms  measured/simulated\n");
  bool all_met = true;
  for (const Row& r : rows) {
    const double ratio = r.measured / r.simulated;
    all_met = all_met && ratio <= 1.10;
    std::printf("  %-10s  %11.1f  %12.1f  %8.3f %s\n", r.kind.c_str(), r.measured, r.simulated, ratio,
                ratio <= 1.10 ? "(<= 1.10: met)" : "(> 1.10: MISSED)");
  }
  auto ranking = [&](bool measured) {
    std::vector<Row> sorted = rows;
    std::stable_sort(sorted.begin(), sorted.end(), [&](const Row& a, const Row& b) {
      return measured ? a.measured < b.measured : a.simulated < b.simulated;
    });
    std::string text;
    for (const Row& r : sorted) text += (text.empty() ? "" : " < ") + r.kind;
    return text;
  };
  const std::string by_measured = ranking(true), by_simulated = ranking(false);
  std::printf("  ranking by measured step:   %s\n", by_measured.c_str());
  std::printf("  ranking by simulated span:  %s\n", by_simulated.c_str());
  std::printf("  rankings %s; ratio target %s\n\n", by_measured == by_simulated ? "match" : "DIFFER",
              all_met ? "met for every schedule" : "MISSED for some schedule");
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 5, only_ranks = 0;
  double f = 20, b = 40, w = 20;
  const std::vector<dualpipe::bench::Option> options = {
      {"--steps", &steps}, {"--ranks", &only_ranks}, {"--F", &f}, {"--B", &b}, {"--W", &w}};
  const char* usage = "usage: bench_schedule_fidelity [--ranks 4|8] [--steps N] [--F ms --B ms --W ms]";
  if (!dualpipe::bench::parse_options(argc, argv, options, usage)) return 2;
  try {
    if (bench::is_rank_process()) return run_rank(steps, f, b, w);
    std::printf("Schedule fidelity: sleeping stages over Gloo/TCP, one process per rank; measured step / simulated "
                "makespan (same costs + measured latency)\n\n");
    int status = 0;
    for (int R : {4, 8}) {
      if (only_ranks != 0 && only_ranks != R) continue;
      std::fflush(stdout);  // before the ranks write to the same stdout
      int rc = bench::run_rank_processes(R,
                                         {"--steps", std::to_string(steps), "--F", std::to_string(f), "--B",
                                          std::to_string(b), "--W", std::to_string(w)},
                                         std::chrono::seconds(300));
      if (rc != 0) {
        std::fprintf(stderr, "R=%d: ranks failed (status %d)\n", R, rc);
        status = 1;
      }
    }
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
