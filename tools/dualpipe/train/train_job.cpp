#include "train_job.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>

#include "dualpipe/comm/gloo_communicator.h"
#include "dualpipe/generators.h"
#include "dualpipe/runtime/clock_sync.h"
#include "dualpipe/runtime/executor.h"
#include "dualpipe/runtime/gather.h"
#include "dualpipe/runtime/trace_gather.h"
#include "dualpipe/simulate.h"
#include "dualpipe/trace.h"
#include "train_check.h"

namespace dualpipe::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kStepStatsTag = comm::application_tag(1);
constexpr int kReplicaStatsTag = comm::application_tag(2);

// What every rank reports to rank 0 after each step (one double each, in this order).
enum StepField {
  kLossSum, kStepMs, kSpanUs, kBusyUs, kLossesChecked, kGradsChecked, kWorstCosine, kHalfRtt, kPeakActivations, kPeakBytes,
  kFields
};

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += (out.empty() ? "" : "\n") + l;
  return out;
}

// Span (first start to last end) and busy time (sum of durations) of this rank's compute actions among
// records[from..], the spec's per-rank quantities, measured.
std::pair<double, double> span_and_busy(const runtime::Executor& executor, size_t from) {
  const auto& records = executor.recorded_actions();
  const auto& actions = executor.lowered_schedule().actions[executor.pipeline_rank()];
  Clock::time_point first = Clock::time_point::max(), last = Clock::time_point::min();
  double busy = 0;
  for (size_t i = from; i < records.size(); ++i) {
    if (!actions[records[i].index].is_compute()) continue;
    first = std::min(first, records[i].start);
    last = std::max(last, records[i].end);
    busy += std::chrono::duration<double, std::micro>(records[i].end - records[i].start).count();
  }
  if (first > last) return {0.0, 0.0};
  return {std::chrono::duration<double, std::micro>(last - first).count(), busy};
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainOptions& o, std::vector<torch::Tensor> params) {
  if (o.optimizer == "sgd")
    return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(learning_rate(o)));
  return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(learning_rate(o)));
}

// Rank 0's console: the header, the per-step table, the checks and the summary.
class Report {
 public:
  Report(const TrainOptions& o, const Schedule& s) : options_(o) {
    const int per_stage = o.layers / s.num_stages;
    std::cout << "dualpipe train: " << s.kind << " schedule on " << o.ranks << " ranks (one process each), "
              << s.num_stages << " stages x " << per_stage << (per_stage == 1 ? " residual block" : " residual blocks")
              << ", hidden " << o.hidden << "\n"
              << "  " << o.microbatches << " micro-batches x " << o.batch << " rows per step, " << o.optimizer
              << " lr " << learning_rate(o) << ", " << o.steps << " steps, seed " << o.seed
              << ", 1 intra-op thread per rank\n"
              << "  task: regress a fixed random teacher network on fresh generated inputs every step\n\n";
    std::printf("%5s  %10s  %9s  %7s\n", "step", "loss", "step ms", "bubble");
    std::fflush(stdout);
  }

  void step(int step, const std::vector<torch::Tensor>& gathered) {
    double loss = 0, step_ms = 0, max_span = 0, max_busy = 0;
    for (const auto& t : gathered) {
      const double* f = t.data_ptr<double>();
      loss += f[kLossSum];
      step_ms = std::max(step_ms, f[kStepMs]);
      max_span = std::max(max_span, f[kSpanUs]);
      max_busy = std::max(max_busy, f[kBusyUs]);
      half_rtt_us_ = std::max(half_rtt_us_, f[kHalfRtt]);
    }
    const double bubble = max_span > 0 ? (max_span - max_busy) / max_span : 0;
    peak_activations_.resize(gathered.size());
    for (size_t r = 0; r < gathered.size(); ++r) {
      const int peak = static_cast<int>(gathered[r].data_ptr<double>()[kPeakActivations]);
      peak_activations_[r] = std::max(peak_activations_[r], peak);
      peak_bytes_.resize(gathered.size());
      peak_bytes_[r] = std::max(peak_bytes_[r], gathered[r].data_ptr<double>()[kPeakBytes]);
    }
    if (step == 0) first_loss_ = loss;
    last_loss_ = loss;
    if (step > 0 || options_.steps == 1) {
      step_ms_sum_ += step_ms;
      bubble_sum_ += bubble;
      ++averaged_;
    }
    std::printf("%5d  %10.6f  %9.2f  %6.1f%%\n", step + 1, loss, step_ms, 100 * bubble);
    if (step == 0) {
      int losses = 0, grads = 0;
      double worst = 0;
      for (const auto& t : gathered) {
        const double* f = t.data_ptr<double>();
        losses += static_cast<int>(f[kLossesChecked]);
        grads += static_cast<int>(f[kGradsChecked]);
        worst = std::max(worst, f[kWorstCosine]);
      }
      char worst_text[32];
      std::snprintf(worst_text, sizeof worst_text, "%.1e", worst);
      std::printf("       step 1 matches the single-process reference: %d losses bit-identical, %d gradients "
                  "within cosine distance 1e-13 (worst %s)\n",
                  losses, grads, worst_text);
    }
    std::fflush(stdout);
  }

  void summary(const Schedule& s, int compared, const std::string& trace_path, size_t events) {
    std::cout << "\n";
    if (s.placement.num_replicas() < 2) {
      std::cout << "replicas: one copy of every stage under " << s.kind << ", nothing to compare\n";
    } else {
      std::cout << "replicas identical: all " << compared << " parameter tensors bit-identical between ranks r and "
                << s.num_ranks - 1 << "-r after " << options_.steps << " steps\n";
    }
    std::string measured, planned;
    for (int p : peak_activations_) measured += " " + std::to_string(p);
    for (int p : peak_activations(s)) planned += " " + std::to_string(p);
    std::cout << "peak live activations per rank (stage units):" << measured << " measured,"
              << planned << " planned\n";
    // Bytes per planned stage activation: the act_bytes that makes `dualpipe simulate` predict this run's memory.
    std::string bytes, per_unit;
    const std::vector<int> plan = peak_activations(s);
    for (size_t r = 0; r < peak_bytes_.size(); ++r) {
      bytes += " " + fixed(peak_bytes_[r] / 1024.0, 1);
      per_unit += " " + (plan[r] > 0 ? fixed(peak_bytes_[r] / plan[r] / 1024.0, 1) : std::string("-"));
    }
    std::cout << "peak activation KiB per rank:" << bytes << " measured";
    if (options_.act_bytes > 0) {
      std::string planned_bytes;
      for (int p : plan) planned_bytes += " " + fixed(p * options_.act_bytes / 1024.0, 1);
      std::cout << "," << planned_bytes << " planned (act_bytes=" << options_.act_bytes << ")\n";
    } else {
      std::cout << "; per planned stage activation:" << per_unit << " (--act-bytes or simulate's act_bytes)\n";
    }
    const double change = first_loss_ != 0 ? 100 * (last_loss_ - first_loss_) / first_loss_ : 0;
    std::cout << "loss " << fixed(first_loss_, 6) << " -> " << fixed(last_loss_, 6) << " (" << (change <= 0 ? "" : "+")
              << fixed(change, 1) << "%) over " << options_.steps << " steps\n";
    const std::string which = options_.steps > 1 ? " (steps 2-" + std::to_string(options_.steps) + ")" : "";
    std::cout << "mean step " << fixed(step_ms_sum_ / std::max(averaged_, 1), 2) << " ms, mean bubble "
              << fixed(100 * bubble_sum_ / std::max(averaged_, 1), 1) << "%" << which
              << "; bubble = (max span - max busy) / max span over ranks, measured\n";
    if (!trace_path.empty()) {
      std::cout << "trace: " << trace_path << " (" << events << " events, clocks aligned to rank 0 within "
                << fixed(half_rtt_us_, 0) << " us)\n"
                << "  open it in https://ui.perfetto.dev, or compare it with the plan: dualpipe compare --trace "
                << trace_path << "\n";
    }
    std::cout.flush();
  }

 private:
  const TrainOptions& options_;
  double first_loss_ = 0, last_loss_ = 0, step_ms_sum_ = 0, bubble_sum_ = 0, half_rtt_us_ = 0;
  int averaged_ = 0;
  std::vector<int> peak_activations_;  // per rank, max over steps
  std::vector<double> peak_bytes_;     // per rank, max over steps
};

}  // namespace

ModelSpec model_spec(const TrainOptions& o) { return ModelSpec{o.hidden, o.layers, o.seed}; }

void run_train_rank(const TrainOptions& o) {
  const Schedule schedule = check_train_options(o);
  const ModelSpec spec = model_spec(o);
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_seconds * 1000));
  std::shared_ptr<comm::Communicator> communicator = comm::GlooCommunicator::from_environment(timeout);
  DUALPIPE_REQUIRE(communicator->size() == o.ranks, "WORLD_SIZE is ", communicator->size(), " but --ranks is ",
                   o.ranks, ": start one process per pipeline rank");
  at::set_num_threads(1);
  const int rank = communicator->rank();
  const int M = o.microbatches, S = schedule.num_stages;

  std::map<int, StudentStage> modules;
  std::map<int, std::shared_ptr<runtime::Stage>> stages;
  std::vector<torch::Tensor> parameters;
  for (int m = 0; m < M; ++m)
    for (int s = 0; s < S; ++s)
      if (schedule.placement.rank(s, m) == rank && !modules.count(s)) {
        StudentStage stage = make_student_stage(spec, s, S);
        for (const auto& p : stage->parameters()) parameters.push_back(p);
        modules.emplace(s, stage);
        stages.emplace(s, runtime::make_stage(stage));
      }
  runtime::ExecutorOptions eo;
  eo.boundaries = runtime::ExecutorOptions::uniform({{{o.batch, o.hidden}, torch::kFloat}}, S);
  eo.record_trace = true;
  eo.measure_memory = true;
  eo.timeout = timeout;
  runtime::Executor executor(schedule, stages, communicator, eo);
  auto optimizer = make_optimizer(o, parameters);
  const runtime::ClockSync clock = runtime::synchronize_clocks(*communicator, 8, timeout);

  std::unique_ptr<Report> report;
  if (rank == 0) report = std::make_unique<Report>(o, schedule);
  for (int step = 0; step < o.steps; ++step) {
    const Batch batch = make_batch(spec, step, M, o.batch);
    runtime::StepArgs args;
    std::vector<torch::Tensor> in, out;
    const auto inputs = batch.inputs.chunk(M, 0), targets = batch.targets.chunk(M, 0);
    for (int m : executor.entering_microbatches()) in.push_back(inputs[m]);
    for (int m : executor.loss_microbatches()) out.push_back(targets[m]);
    if (!in.empty()) args.inputs = {torch::cat(in, 0)};
    if (!out.empty()) args.labels = {torch::cat(out, 0)};
    args.criterion = runtime::single_tensor_criterion(
        [M](const torch::Tensor& output, const torch::Tensor& target) { return microbatch_loss(output, target, M); });
    args.num_microbatches = M;

    const size_t first_record = executor.recorded_actions().size();
    optimizer->zero_grad();
    const auto start = Clock::now();
    const runtime::StepResult result = executor.step(args);
    executor.reduce_replica_gradients();
    double step_ms = ms_since(start);
    ReferenceCheck check;
    if (step == 0) {
      check = check_against_reference(spec, S, batch, M, executor, result, modules);
      if (!check.problems.empty())
        throw Error("step 1 differs from the single-process reference:\n" + join(check.problems));
    }
    const auto optimizer_start = Clock::now();
    optimizer->step();
    step_ms += ms_since(optimizer_start);

    torch::Tensor stats = torch::zeros({kFields}, torch::kDouble);
    double* f = stats.data_ptr<double>();
    for (int m : executor.loss_microbatches()) f[kLossSum] += result.losses[m].item<double>();
    f[kStepMs] = step_ms;
    std::tie(f[kSpanUs], f[kBusyUs]) = span_and_busy(executor, first_record);
    f[kLossesChecked] = check.losses_compared;
    f[kGradsChecked] = check.gradients_compared;
    f[kWorstCosine] = check.worst_cosine_distance;
    f[kHalfRtt] = clock.round_trip_ns / 2000.0;
    f[kPeakActivations] = executor.last_step_stats().peak_live_activations;
    f[kPeakBytes] = static_cast<double>(executor.last_step_stats().peak_activation_bytes);
    const auto gathered = runtime::gather_to_root(*communicator, stats, kStepStatsTag, timeout);
    if (report) report->step(step, gathered);
  }

  const ReplicaCheck replicas = compare_replicas(schedule.placement, rank, modules, *communicator, timeout);
  if (!replicas.problems.empty())
    throw Error("replicas differ after " + std::to_string(o.steps) + " steps:\n" + join(replicas.problems));
  // Reaching this gather means this rank's replicas matched; rank 0 counts the comparisons.
  const auto counts = runtime::gather_to_root(*communicator, torch::full({1}, double(replicas.tensors_compared), torch::kDouble),
                                              kReplicaStatsTag, timeout);
  int total_compared = 0;
  for (const auto& t : counts) total_compared += static_cast<int>(t.item<double>());

  const Trace trace = runtime::gather_trace(executor, *communicator, clock, timeout);
  std::string trace_path;
  if (rank == 0 && !o.trace.empty()) {
    trace_path = std::filesystem::absolute(o.trace).lexically_normal().string();
    write_trace_file(trace_path, trace);
  }
  // Each pair compared twice (once from each side).
  if (report) report->summary(schedule, total_compared / 2, trace_path, trace.events.size());
  communicator->barrier();  // rank 0 hosts the rendezvous store: leave together
}

}  // namespace dualpipe::cli
