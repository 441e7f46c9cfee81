// One rank of the Gloo/TCP reference checks, launched as a process by test_gloo_processes.cpp with
// torchrun-style MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE. Usage:
//   runtime_gloo_worker <kind|all> [forward-only] [single-tag]
//     one step of the schedule (every kind in turn with `all`), replica gradients reduced, compared with its
//     own single-process reference; `single-tag` sends every message with tag 0, as NCCL would see them.
//   runtime_gloo_worker soak <steps>
//     every kind in turn, <steps> training steps each (new modules and executor every step, each step checked
//     against the single-process reference); rank 0 prints a line per kind. For scripts/soak.sh.
//   runtime_gloo_worker subgroups
//     a world of 4 ranks split into two pipeline sub-groups {0, 2} and {1, 3}, each a ProcessGroupGloo the
//     worker builds itself over a prefix of the world's store and hands to ProcessGroupCommunicator; both
//     pipelines run DualPipe side by side, then the world group must still work.
// Exits 0 when everything matches (1 with the mismatches on stderr otherwise).
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "dualpipe/comm/backend.h"
#include "dualpipe/comm/gloo_communicator.h"
#include "dualpipe/schedule/generators.h"
#include "runtime/support/reference_model.h"

namespace {

using namespace dualpipe;

std::vector<std::string> check_kind(const std::string& kind, std::shared_ptr<comm::Communicator> communicator,
                                    bool training) {
  ScheduleOptions options;
  options.num_ranks = communicator->size();
  options.num_microbatches = 2 * communicator->size();
  Schedule schedule = make_schedule(kind, options);
  auto setup = testing::make_setup(schedule.num_stages, schedule.num_microbatches, 8, 2, 1234);
  auto reference = testing::run_reference(setup, training);
  auto problems = testing::run_and_check_rank(setup, reference, schedule, communicator, training);
  for (auto& p : problems) p = kind + ": " + p;
  return problems;
}

// Two pipelines, each on a sub-group of the 4-rank world made by the caller, as a job with data parallelism
// would make them.
std::vector<std::string> check_subgroups() {
  const comm::GlooOptions env = comm::GlooCommunicator::options_from_environment();
  if (env.world_size != 4) return {"the sub-group check needs WORLD_SIZE=4"};
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(env.master_port);
  store_options.isServer = env.rank == 0;
  store_options.numWorkers = 4;
  store_options.timeout = std::chrono::seconds(60);
  auto store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, store_options);
  comm::ProcessGroupSpec spec;
  spec.interface = "lo";
  auto world = comm::make_process_group(store, env.rank, 4, spec);
  const int pipeline = env.rank % 2;  // {0, 2} and {1, 3}
  auto group = comm::make_process_group(
      c10::make_intrusive<c10d::PrefixStore>("pipeline" + std::to_string(pipeline), store), env.rank / 2, 2, spec);
  auto communicator = std::make_shared<comm::ProcessGroupCommunicator>(group);
  if (communicator->rank() != env.rank / 2 || communicator->size() != 2)
    return {"the communicator does not report the sub-group's own rank and size"};
  auto problems = check_kind("dualpipe", communicator, true);
  std::vector<at::Tensor> one{torch::ones({1})};
  world->allreduce(one)->wait();
  if (one[0].item<float>() != 4.0f) problems.push_back("the world group's all-reduce gave a wrong sum");
  communicator->barrier();
  return problems;
}

std::vector<std::string> all_kinds() {
  std::vector<std::string> kinds;
  for (const GeneratorInfo& g : generators()) kinds.emplace_back(g.name);
  return kinds;
}

// Repeated reference-checked steps of every kind; rank 0 reports each kind's count of steps and mismatches.
std::vector<std::string> soak(int steps) {
  auto communicator = comm::GlooCommunicator::from_environment(std::chrono::seconds(60));
  std::vector<std::string> problems;
  for (const std::string& kind : all_kinds()) {
    const auto start = std::chrono::steady_clock::now();
    ScheduleOptions options;
    options.num_ranks = communicator->size();
    options.num_microbatches = 2 * communicator->size();
    const Schedule schedule = make_schedule(kind, options);
    const auto setup = testing::make_setup(schedule.num_stages, schedule.num_microbatches, 8, 2, 99);
    const auto reference = testing::run_reference(setup, true);
    int mismatched_steps = 0;
    for (int step = 0; step < steps; ++step) {
      auto found = testing::run_and_check_rank(setup, reference, schedule, communicator, true);
      mismatched_steps += found.empty() ? 0 : 1;
      for (auto& p : found) problems.push_back(kind + " step " + std::to_string(step) + ": " + p);
    }
    communicator->barrier();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (communicator->rank() == 0)
      std::printf("soak: %-16s R=%d M=%d  %d steps  %d with a mismatch on rank 0  %.1f s\n", kind.c_str(),
                  schedule.num_ranks, schedule.num_microbatches, steps, mismatched_steps, seconds);
    std::fflush(stdout);
  }
  return problems;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: runtime_gloo_worker <kind|all> [forward-only] [single-tag] | subgroups | soak <steps>\n";
    return 2;
  }
  try {
    at::set_num_threads(1);
    const std::string what = argv[1];
    std::vector<std::string> problems;
    if (what == "subgroups") {
      problems = check_subgroups();
    } else if (what == "soak") {
      problems = soak(argc > 2 ? std::atoi(argv[2]) : 200);
    } else {
      bool training = true, single_tag = false;
      for (int i = 2; i < argc; ++i) {
        training = training && std::string(argv[i]) != "forward-only";
        single_tag = single_tag || std::string(argv[i]) == "single-tag";
      }
      comm::GlooOptions options = comm::GlooCommunicator::options_from_environment();
      options.single_tag = single_tag;
      auto communicator = std::make_shared<comm::GlooCommunicator>(options);
      const std::vector<std::string> kinds =
          what == "all" ? all_kinds() : std::vector<std::string>{what};
      for (const auto& kind : kinds) {
        auto found = check_kind(kind, communicator, training);
        problems.insert(problems.end(), found.begin(), found.end());
      }
      communicator->barrier();  // nobody tears down its transport while a peer still reads from it
    }
    for (const auto& p : problems) std::cerr << p << "\n";
    return problems.empty() ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "worker error: " << e.what() << "\n";
    return 1;
  }
}
