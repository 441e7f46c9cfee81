#include "stall_watch_setup.h"

#include <filesystem>

#include "dualpipe/comm/process_group_communicator.h"
#include "dualpipe/parallel/mesh.h"
#include "dualpipe/util/atomic_file.h"

namespace dualpipe::train {

std::unique_ptr<runtime::StallWatch> watch_for_stalls(const TrainConfig& config,
                                                      std::shared_ptr<const runtime::FlightRecorder> recorder,
                                                      comm::Communicator& world) {
  runtime::install_stall_signal();
  runtime::StallWatchOptions options;
  options.after = config.device.stall_after();
  options.world_rank = world.rank();
  options.world_size = world.size();
  if (world.size() == config.world_size()) {
    const parallel::ProcessMesh mesh({config.parallel.pp, config.parallel.dp, config.parallel.ep, config.parallel.tp, config.parallel.cp});
    const parallel::MeshCoordinates at = mesh.coordinates(world.rank());
    options.to_world = mesh.pipeline_group(at.replica, at.inner);
  }
  if (!config.device.stall_report_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(config.device.stall_report_dir, error);
    check_can_write_file(config.device.stall_report_dir + "/stall-rank" + std::to_string(world.rank()) + ".json");
    options.directory = config.device.stall_report_dir;
  }
  auto* group = dynamic_cast<comm::ProcessGroupCommunicator*>(&world);
  return std::make_unique<runtime::StallWatch>(std::move(recorder), group ? group->peer_monitor() : nullptr,
                                               std::move(options));
}

}  // namespace dualpipe::train
