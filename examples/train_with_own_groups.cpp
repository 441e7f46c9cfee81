// Training with process groups of your own: a DualPipe pipeline of 2 ranks times 2 data-parallel replicas (4
// processes), laid out stage-major (rank = p x 2 + d: the two replicas of a pipeline rank are neighbours, say on
// one machine) instead of dualpipe's replica-major default (rank = d x 2 + p, parallel/mesh.h). The program makes
// its Gloo groups itself from the world's store, as it would make NCCL groups, and hands them to the trainer.
//
//   dualpipe launch --nproc 4 -- train_with_own_groups [METRICS_FILE]
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "dualpipe/comm/backend.h"
#include "dualpipe/comm/gloo_communicator.h"
#include "dualpipe/train/run_plan.h"
#include "dualpipe/train/trainer.h"

namespace {

constexpr int kPipelineRanks = 2, kReplicas = 2;
int rank_of(int pipeline_rank, int replica) { return pipeline_rank * kReplicas + replica; }

// The Gloo group of `ranks` (every member calls this with the same list), under a store prefix of its own.
c10::intrusive_ptr<c10d::ProcessGroup> make_group(dualpipe::comm::GlooCommunicator& world, const std::string& name,
                                                  const std::vector<int>& ranks) {
  int me = 0;
  while (ranks[static_cast<size_t>(me)] != world.rank()) ++me;
  dualpipe::comm::ProcessGroupSpec spec;  // .backend = BackendKind::nccl for CUDA stages
  spec.timeout = world.timeout();
  spec.interface = world.interface();
  auto store = c10::make_intrusive<c10d::PrefixStore>("own-groups/" + name, world.store());
  return dualpipe::comm::make_process_group(store, me, static_cast<int>(ranks.size()), spec);
}

}  // namespace

int main(int argc, char** argv) {
  dualpipe::train::TrainConfig config;
  config.pipeline.schedule = "dualpipe";
  config.parallel.pp = kPipelineRanks;
  config.parallel.dp = kReplicas;
  config.pipeline.microbatches = 4;
  config.model.layers = 8;
  config.model.hidden = 32;
  config.model.heads = 2;
  config.model.seq_len = 16;
  config.data.batch = 2;
  config.optimizer.warmup = 1;
  config.optimizer.steps = 3;
  config.outputs.eval_every = 0;
  config.outputs.sample_tokens = 0;
  config.outputs.trace = "";
  if (argc > 1) config.outputs.metrics = argv[1];
  try {
    dualpipe::train::check_config(config);
    auto world = std::make_shared<dualpipe::comm::GlooCommunicator>(
        dualpipe::comm::GlooCommunicator::options_from_environment());
    const int p = world->rank() / kReplicas, d = world->rank() % kReplicas;
    // Every rank makes every group it is in, in the same order: its pipeline, its data-parallel group, then the
    // group of its stages' copies (DualPipe keeps stage s on pipeline ranks s and 1 - s: with two pipeline ranks
    // both stages sit on both, so one group per stage over all four ranks). That group lists its members by replica,
    // then by copy (the copy on pipeline rank s first), as dualpipe's own does, so its sums run in the same order.
    dualpipe::parallel::MeshGroups groups;
    groups.pipeline = make_group(*world, "pipeline/" + std::to_string(d), {rank_of(0, d), rank_of(1, d)});
    groups.data_parallel = make_group(*world, "data/" + std::to_string(p), {rank_of(p, 0), rank_of(p, 1)});
    std::map<int, dualpipe::parallel::StageCopyGroups> copies;
    for (int stage = 0; stage < kPipelineRanks; ++stage)
      copies[stage].dense = make_group(
          *world, "copies/" + std::to_string(stage),
          {rank_of(stage, 0), rank_of(1 - stage, 0), rank_of(stage, 1), rank_of(1 - stage, 1)});
    dualpipe::train::run_training_rank(config, world, groups, copies);
  } catch (const dualpipe::InvalidArgument& e) {
    std::cerr << "train_with_own_groups: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "train_with_own_groups: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
