// A rank's place in the job (trainer.h's entry points): its world, its groups and the pipeline's communicator, made
// from the launcher's environment or taken from the caller, then the training loop over them (training_loop.h).
#include <memory>
#include <utility>

#include "dualpipe/comm/gloo_communicator.h"
#include "dualpipe/comm/process_group_communicator.h"
#include "dualpipe/parallel/data_parallel.h"
#include "dualpipe/parallel/process_groups.h"
#include "dualpipe/train/run_plan.h"
#include "dualpipe/train/trainer.h"
#include "device_choice.h"
#include "job_groups.h"
#include "training_loop.h"

namespace dualpipe::train {
namespace {

void run_on_groups(const TrainConfig& config, RunPlan plan, std::shared_ptr<comm::Communicator> world,
                   const parallel::MeshGroups& groups, const std::map<int, parallel::StageCopyGroups>& stage_copies,
                   const TrainHooks& hooks) {
  std::shared_ptr<comm::Communicator> pipeline;
  if (groups.pipeline_channels) {
    pipeline = connect_pipeline_channels(groups.pipeline_channels, plan.schedule, stage_device(choose_device(config)),
                                         config.device.timeout());
  } else {
    comm::ProcessGroupCommunicatorOptions pipeline_options;
    pipeline_options.timeout = config.device.timeout();
    pipeline = std::make_shared<comm::ProcessGroupCommunicator>(groups.pipeline, pipeline_options);
  }
  LayerGroups layers = make_layer_groups(config, groups);
  parallel::DataParallel dp = config.parallel.ep > 1
                        ? parallel::DataParallel(groups.data_parallel, world, groups.expert,
                                                 groups.expert_data_parallel)
                        : parallel::DataParallel(groups.data_parallel, world);
  dp.set_stage_copy_groups(stage_copies);
  run_training_loop(config, std::move(plan), hooks, std::move(pipeline), std::move(dp), std::move(layers));
}

}  // namespace

void run_training_rank(const TrainConfig& config, std::shared_ptr<comm::Communicator> communicator,
                       const TrainHooks& hooks) {
  DUALPIPE_REQUIRE(config.parallel.dp == 1 && config.parallel.tp == 1, "--dp ", config.parallel.dp, " and --tp ", config.parallel.tp,
                   " need the world's groups: use run_training_rank(config)");
  run_training_loop(config, make_run_plan(config), hooks, std::move(communicator), parallel::DataParallel());
}

void run_training_rank(const TrainConfig& config, std::shared_ptr<comm::Communicator> world,
                       const parallel::MeshGroups& groups,
                       const std::map<int, parallel::StageCopyGroups>& stage_copies, const TrainHooks& hooks) {
  check_groups_fit(config, world.get(), groups);  // before the plan: a group that does not fit is the error
  run_on_groups(config, make_run_plan(config), std::move(world), groups, stage_copies, hooks);
}

void run_training_rank(const TrainConfig& config, const TrainHooks& hooks) {
  RunPlan plan = make_run_plan(config);  // a bad option fails here, before waiting for the other ranks
  const DeviceChoice choice = choose_device(config);  // before the rendezvous too
  const auto timeout = config.device.timeout();
  comm::GlooOptions world_options = comm::GlooCommunicator::options_from_environment();
  world_options.timeout = timeout;
  // Before the rendezvous, which would wait for ranks that never come.
  const int world_size = world_options.world_size;
  DUALPIPE_REQUIRE(world_size == config.world_size(), "WORLD_SIZE is ", world_size, " but ", config.world_product(),
                   " is ", config.world_size(), ": start one process per pipeline rank of every replica",
                   config.parallel.tp > 1 || config.parallel.cp > 1 ? " and tensor and context rank" : "");
  auto world = std::make_shared<comm::GlooCommunicator>(world_options);
  const JobGroups groups = make_job_groups(config, plan.schedule, choice, *world);
  if (uses_mesh_groups(config))
    return run_on_groups(config, std::move(plan), world, groups.mesh, groups.stage_copies, hooks);
  run_training_loop(config, std::move(plan), hooks, groups.pipeline ? groups.pipeline : world, parallel::DataParallel());
}

}  // namespace dualpipe::train
