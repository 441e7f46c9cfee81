// The runtime's own cost per step (host overhead), side by side with DeepSeek's reference DualPipe in one run:
// DualPipe on the example stage (Linear(8, 32), GELU, Linear(32, 8)) with micro-batches of 1 x 2 x 8, so compute is
// negligible and what remains is the executor, the communicator, the transport and LibTorch's per-operator cost.
// One process per rank, one intra-op thread each.
//
//   build/bench_runtime_overhead --reference ~/DualPipe       R=4 M=20 and R=8 M=32, 3 rounds of 50 timed steps
//   build/bench_runtime_overhead --ranks 4 --rounds 5 --steps 100 --threads on
//
// Each round runs, one after the other: the reference (bench/reference_overhead.py: DeepSeek's DualPipe and its own
// example stage, imported from the checkout given, on Gloo), ours over Gloo with the direct links (the default
// transport), ours with point-to-point through c10d's Gloo (DUALPIPE_DIRECT_LINKS=0), and with --threads on the same
// ranks as threads of one process (no transport). Each step is timed on rank 0 from a barrier to the barrier after
// it (the slowest rank's step plus one barrier, whose own median is printed). Printed: the median of the rounds'
// medians with their range, and our step over the reference's of the same round. Target (issue 51): <= 0.25 at
// R=4 M=20 and at R=8 M=32.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dualpipe/comm/gloo_communicator.h"
#include "dualpipe/comm/in_process_communicator.h"
#include "dualpipe/runtime/executor.h"
#include "dualpipe/runtime/mlp_stage.h"
#include "dualpipe/schedule/generators.h"
#include "options.h"
#include "rank_processes.h"

namespace {

using namespace dualpipe;
using Clock = std::chrono::steady_clock;

constexpr double kTargetRatio = 0.25;
std::mutex seed_lock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

struct Case {
  int ranks, microbatches;
};

// Rank 0's medians over the timed steps, in ms.
struct Timing {
  double step = 0, p90 = 0, own = 0, barrier = 0;
};

Timing time_steps(const std::shared_ptr<comm::Communicator>& communicator, int microbatches, int steps, int warmup) {
  at::set_num_threads(1);
  const int rank = communicator->rank();
  Schedule schedule = make_dualpipe({communicator->size(), microbatches});
  const int64_t hidden = 8, sequence = 2, batch = 1;
  std::map<int, std::shared_ptr<runtime::Stage>> stages;
  std::vector<runtime::MlpStage> modules;
  for (int s = 0; s < schedule.num_stages; ++s)
    for (int m = 0; m < schedule.num_microbatches; ++m)
      if (schedule.placement.rank(s, m) == rank && !stages.count(s)) {
        std::lock_guard<std::mutex> lock(seed_lock);  // ranks may be threads
        torch::manual_seed(s);
        modules.emplace_back(hidden);
        stages[s] = runtime::make_stage(modules.back());
      }
  runtime::ExecutorOptions options;
  options.boundaries =
      runtime::ExecutorOptions::uniform({{{batch, sequence, hidden}, torch::kFloat}}, schedule.num_stages);
  runtime::Executor executor(schedule, stages, communicator, options);
  runtime::StepArgs args;
  args.num_microbatches = microbatches;
  const auto entering = static_cast<int64_t>(executor.entering_microbatches().size());
  const auto losses = static_cast<int64_t>(executor.loss_microbatches().size());
  if (entering > 0) args.inputs = {torch::randn({entering * batch, sequence, hidden})};
  if (losses > 0) args.labels = {torch::randn({losses * batch, sequence, hidden})};
  args.criterion = runtime::single_tensor_criterion(
      [](const torch::Tensor& o, const torch::Tensor& l) { return torch::mse_loss(o, l); });

  std::vector<double> step_ms, own_ms, barrier_ms;
  for (int i = 0; i < warmup + steps; ++i) {
    for (auto& m : modules) m->zero_grad();
    communicator->barrier();
    auto start = Clock::now();
    executor.step(args);
    double own = ms_since(start);
    communicator->barrier();
    double total = ms_since(start);
    auto b = Clock::now();
    communicator->barrier();
    double barrier = ms_since(b);
    if (i < warmup) continue;
    step_ms.push_back(total);
    own_ms.push_back(own);
    barrier_ms.push_back(barrier);
  }
  communicator->barrier();
  auto s = bench::summarize(step_ms);
  return {s.median, s.p90, bench::summarize(own_ms).median, bench::summarize(barrier_ms).median};
}

// One process per rank over Gloo; `direct`: the direct links, else point-to-point through c10d.
std::optional<Timing> run_processes(Case c, bool direct, int steps, int warmup, bool mkldnn) {
  char path[] = "/tmp/bench_runtime_overhead_XXXXXX";
  int fd = ::mkstemp(path);
  if (fd < 0) return std::nullopt;
  ::close(fd);
  ::setenv("DUALPIPE_DIRECT_LINKS", direct ? "1" : "0", 1);
  std::fflush(stdout);  // before the ranks share it
  int rc = bench::run_rank_processes(c.ranks,
                                     {"--steps", std::to_string(steps), "--warmup", std::to_string(warmup),
                                      "--microbatches", std::to_string(c.microbatches), "--mkldnn",
                                      mkldnn ? "on" : "off", "--result", path},
                                     std::chrono::seconds(300));
  ::unsetenv("DUALPIPE_DIRECT_LINKS");
  Timing t;
  std::ifstream in(path);
  bool read = static_cast<bool>(in >> t.step >> t.p90 >> t.own >> t.barrier);
  std::remove(path);
  if (rc != 0 || !read) {
    std::fprintf(stderr, "R=%d M=%d (%s): ranks failed (status %d)\n", c.ranks, c.microbatches,
                 direct ? "direct links" : "c10d", rc);
    return std::nullopt;
  }
  return t;
}

// All ranks as threads of this process over the in-process communicator: no transport.
Timing run_threads(Case c, int steps, int warmup) {
  auto hub = std::make_shared<comm::InProcessHub>(c.ranks, std::chrono::seconds(60));
  Timing rank0;
  std::vector<std::thread> threads;
  for (int r = 0; r < c.ranks; ++r)
    threads.emplace_back([&, r] {
      Timing t = time_steps(std::make_shared<comm::InProcessCommunicator>(hub, r), c.microbatches, steps, warmup);
      if (r == 0) rank0 = t;
    });
  for (auto& t : threads) t.join();
  return rank0;
}

// DeepSeek's DualPipe through bench/reference_overhead.py: its median step in ms.
std::optional<double> run_reference(const std::string& python, const std::string& checkout, Case c, int steps,
                                    int warmup) {
  const std::string command = python + " " DUALPIPE_SOURCE_DIR "/bench/reference_overhead.py --reference '" +
                              checkout + "' --ranks " + std::to_string(c.ranks) + " --microbatches " +
                              std::to_string(c.microbatches) + " --steps " + std::to_string(steps) + " --warmup " +
                              std::to_string(warmup) + " 2>&1";
  std::fflush(stdout);
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  std::string output;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  const int rc = ::pclose(pipe);
  const auto at = output.rfind("{\"median_ms\": ");
  if (rc != 0 || at == std::string::npos) {
    std::fprintf(stderr, "the reference failed (%s):\n%s\n", command.c_str(), output.c_str());
    return std::nullopt;
  }
  return std::atof(output.c_str() + at + 14);
}

std::string default_python() {
  const char* venv = std::getenv("DUALPIPE_VENV");
  const char* home = std::getenv("HOME");
  return (venv ? std::string(venv) : std::string(home ? home : "") + "/.local/share/dualpipe/venv") + "/bin/python";
}

// "median (min-max)" of the rounds' values.
std::string spread(std::vector<double> values, const char* format) {
  if (values.empty()) return "-";
  auto s = bench::summarize(values);
  double max = *std::max_element(values.begin(), values.end());
  char text[96];
  std::string f = std::string(format) + " (" + format + "-" + format + ")";
  std::snprintf(text, sizeof text, f.c_str(), s.median, s.min, max);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 50, warmup = 10, rounds = 3, only_ranks = 0, microbatches = 0;
  bool threads = false, direct_links = true, c10d = true, mkldnn = true;
  std::string reference, python = default_python(), result;
  // PyTorch 2 sends small element-wise ops through oneDNN, whose per-call set-up weighs on these tiny stages:
  // --mkldnn off measures without it.
  const std::vector<dualpipe::bench::Option> options = {
      {"--steps", &steps}, {"--warmup", &warmup}, {"--rounds", &rounds}, {"--ranks", &only_ranks},
      {"--microbatches", &microbatches}, {"--reference", &reference}, {"--python", &python},
      {"--threads", &threads}, {"--direct", &direct_links}, {"--c10d", &c10d}, {"--mkldnn", &mkldnn}, {"--result", &result}};
  if (!dualpipe::bench::parse_options(argc, argv, options,
                                      "usage: bench_runtime_overhead [--reference DUALPIPE_CHECKOUT] [--python PATH] "
                                      "[--rounds N] [--steps N] [--warmup N] [--ranks 4|8] [--threads on] "
                                      "[--direct off] [--c10d off] [--mkldnn off]"))
    return 2;
  at::globalContext().setUserEnabledMkldnn(mkldnn);
  try {
    if (dualpipe::bench::is_rank_process()) {
      auto communicator = dualpipe::comm::GlooCommunicator::from_environment(std::chrono::seconds(60));
      Timing t = time_steps(communicator, microbatches, steps, warmup);
      if (communicator->rank() == 0)
        std::ofstream(result) << t.step << ' ' << t.p90 << ' ' << t.own << ' ' << t.barrier;
      return 0;
    }
    std::printf("Host overhead: DualPipe, stage Linear(8, 32) GELU Linear(32, 8), micro-batch 1 x 2 x 8, one process "
                "per rank, 1 intra-op thread; %d rounds of %d timed steps (after %d)\n", rounds, steps, warmup);
    std::printf("step = rank 0's time from a barrier to the barrier after the step; medians over the rounds, "
                "(range); ratio = our step / the reference's in the same round\n\n");
    std::printf("%-9s %-27s %-24s %8s %9s %8s  %-22s %s\n", "case", "runtime", "step ms", "p90 ms", "rank0 own",
                "barrier", "ratio to reference", "target <= 0.25");
    int status = 0;
    for (Case c : {Case{4, 20}, Case{8, 32}}) {
      if (only_ranks != 0 && only_ranks != c.ranks) continue;
      struct Row {
        const char* name;
        std::vector<Timing> timings;
        std::vector<double> ratios;
      };
      std::vector<double> reference_ms;
      Row direct{"dualpipe, direct links", {}, {}}, through_c10d{"dualpipe, c10d Gloo p2p", {}, {}},
          in_threads{"dualpipe, ranks as threads", {}, {}};
      for (int round = 0; round < rounds; ++round) {
        std::optional<double> ref;
        if (!reference.empty() && !(ref = run_reference(python, reference, c, steps, warmup))) status = 1;
        if (ref) reference_ms.push_back(*ref);
        auto add = [&](Row& row, std::optional<Timing> t) {
          if (!t) return void(status = 1);
          row.timings.push_back(*t);
          if (ref) row.ratios.push_back(t->step / *ref);
        };
        if (direct_links) add(direct, run_processes(c, true, steps, warmup, mkldnn));
        if (c10d) add(through_c10d, run_processes(c, false, steps, warmup, mkldnn));
        if (threads) add(in_threads, run_threads(c, steps, warmup));
      }
      const std::string name = "R=" + std::to_string(c.ranks) + " M=" + std::to_string(c.microbatches);
      if (!reference_ms.empty())
        std::printf("%-9s %-27s %-24s\n", name.c_str(), "reference DualPipe (Python)",
                    spread(reference_ms, "%.2f").c_str());
      for (Row* row : {&direct, &through_c10d, &in_threads}) {
        if (row->timings.empty()) continue;
        std::vector<double> step, p90, own, barrier;
        for (const Timing& t : row->timings) {
          step.push_back(t.step), p90.push_back(t.p90), own.push_back(t.own), barrier.push_back(t.barrier);
        }
        std::string verdict = "-";
        if (!row->ratios.empty() && row == &direct)
          verdict = dualpipe::bench::summarize(row->ratios).median <= kTargetRatio ? "met" : "MISSED";
        std::printf("%-9s %-27s %-24s %8.2f %9.2f %8.2f  %-22s %s\n", reference_ms.empty() ? name.c_str() : "",
                    row->name, spread(step, "%.2f").c_str(), dualpipe::bench::summarize(p90).median,
                    dualpipe::bench::summarize(own).median, dualpipe::bench::summarize(barrier).median,
                    spread(row->ratios, "%.3f").c_str(), verdict.c_str());
      }
      std::fflush(stdout);
    }
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
