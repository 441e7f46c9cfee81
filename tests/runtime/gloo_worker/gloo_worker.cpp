// One rank of the Gloo/TCP reference check, launched as a process by test_gloo_processes.cpp with
// torchrun-style MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE. Usage: runtime_gloo_worker <kind> [forward-only].
// Runs one step of the schedule, reduces replica gradients, compares with its own single-process reference,
// and exits 0 when everything matches (1 with the mismatches on stderr otherwise).
#include <torch/torch.h>

#include <iostream>
#include <string>

#include "dualpipe/comm/gloo_communicator.h"
#include "dualpipe/generators.h"
#include "runtime/support/reference_model.h"

int main(int argc, char** argv) {
  using namespace dualpipe;
  if (argc < 2) {
    std::cerr << "usage: runtime_gloo_worker <kind> [forward-only]\n";
    return 2;
  }
  try {
    at::set_num_threads(1);
    bool training = !(argc > 2 && std::string(argv[2]) == "forward-only");
    auto communicator = comm::GlooCommunicator::from_environment(std::chrono::seconds(60));
    ScheduleOptions options;
    options.num_ranks = communicator->size();
    options.num_microbatches = 2 * communicator->size();
    Schedule schedule = make_schedule(argv[1], options);
    auto setup = testing::make_setup(schedule.num_stages, schedule.num_microbatches, 8, 2, 1234);
    auto reference = testing::run_reference(setup, training);
    auto problems = testing::run_and_check_rank(setup, reference, schedule, communicator, training);
    communicator->barrier();  // nobody tears down its transport while a peer still reads from it
    for (const auto& p : problems) std::cerr << p << "\n";
    return problems.empty() ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "worker error: " << e.what() << "\n";
    return 1;
  }
}
