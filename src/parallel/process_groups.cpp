// The c10d sub-groups of a process mesh (see process_groups.h).
#include "dualpipe/parallel/process_groups.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <algorithm>

#include "dualpipe/comm/backend.h"
#include "dualpipe/util/error.h"

namespace dualpipe::parallel {
namespace {

// The group of `ranks` as seen by `rank`, one of them. The prefix names the group by kind and its first rank,
// which every member computes the same.
c10::intrusive_ptr<c10d::ProcessGroup> make_group(const c10::intrusive_ptr<c10d::Store>& store, const std::string& kind,
                                                  const std::vector<int>& ranks, int rank, const GroupOptions& options,
                                                  bool bind_device = true) {
  const auto me = std::find(ranks.begin(), ranks.end(), rank);
  DUALPIPE_CHECK(me != ranks.end(), "rank ", rank, " is not in its own ", kind, " group");
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>(
      dualpipe::detail::concat("dualpipe/group/", kind, "/", ranks.front()), store);
  comm::ProcessGroupSpec spec;
  spec.timeout = options.timeout;
  spec.interface = options.interface;
  spec.backend = options.backend;
  spec.cuda_device = options.cuda_device;
  spec.bind_device = bind_device;
  return comm::make_process_group(prefixed, static_cast<int>(me - ranks.begin()), static_cast<int>(ranks.size()),
                                  spec);
}

}  // namespace

PipelineChannels make_pipeline_channels(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                                        int rank, const GroupOptions& options) {
  // Not bound to a device: NCCL then gives each pair of ranks its own communicator and stream (backend.h).
  PipelineChannels channels;
  channels.upward = make_group(store, "pipeline_upward", ranks, rank, options, false);
  channels.downward = make_group(store, "pipeline_downward", ranks, rank, options, false);
  return channels;
}

MeshGroups make_mesh_groups(const c10::intrusive_ptr<c10d::Store>& store, const ProcessMesh& mesh, int rank,
                            const GroupOptions& options) {
  const MeshCoordinates at = mesh.coordinates(rank);
  // The same order on every rank: a group forms once all its members reach it, and every member reaches the
  // pipeline group first, then the DP group, then the EP groups, then the TP group, so no rank waits on one that
  // waits elsewhere.
  MeshGroups groups;
  const std::vector<int> pipeline = mesh.pipeline_group(at.replica, at.inner);
  const bool channels = options.pipeline_channels || options.backend == comm::BackendKind::nccl;
  // With channels the pipeline group carries no message: unbound, NCCL never makes its communicator.
  groups.pipeline = make_group(store, "pipeline", pipeline, rank, options, /*bind_device=*/!channels);
  if (channels) groups.pipeline_channels = make_pipeline_channels(store, pipeline, rank, options);
  groups.data_parallel =
      make_group(store, "data_parallel", mesh.data_parallel_group(at.pipeline_rank, at.inner), rank, options);
  groups.expert = make_group(store, "expert", mesh.expert_group(rank), rank, options);
  groups.expert_backward = make_group(store, "expert_backward", mesh.expert_group(rank), rank, options);
  groups.expert_data_parallel =
      make_group(store, "expert_data_parallel", mesh.expert_data_parallel_group(rank), rank, options);
  groups.tensor = make_group(store, "tensor", mesh.tensor_group(rank), rank, options);
  groups.tensor_backward = make_group(store, "tensor_backward", mesh.tensor_group(rank), rank, options);
  groups.context = make_group(store, "context", mesh.context_group(rank), rank, options);
  groups.context_backward = make_group(store, "context_backward", mesh.context_group(rank), rank, options);
  return groups;
}

MeshGroups make_gloo_mesh_groups(const c10::intrusive_ptr<c10d::Store>& store, const ProcessMesh& mesh, int rank,
                                 std::chrono::milliseconds timeout, const std::string& interface) {
  GroupOptions options;
  options.timeout = timeout;
  options.interface = interface;
  return make_mesh_groups(store, mesh, rank, options);
}

std::map<int, StageCopyGroups> make_stage_copy_groups(const c10::intrusive_ptr<c10d::Store>& store,
                                                      const ProcessMesh& mesh, int rank,
                                                      const std::vector<std::vector<int>>& pipeline_ranks_of_stage,
                                                      const GroupOptions& options) {
  const MeshCoordinates at = mesh.coordinates(rank);
  std::map<int, StageCopyGroups> groups;
  for (int stage = 0; stage < static_cast<int>(pipeline_ranks_of_stage.size()); ++stage) {
    const std::vector<int>& holders = pipeline_ranks_of_stage[static_cast<std::size_t>(stage)];
    if (holders.size() < 2 || std::find(holders.begin(), holders.end(), at.pipeline_rank) == holders.end()) continue;
    const std::string kind = dualpipe::detail::concat("stage_copies/", stage);
    StageCopyGroups& g = groups[stage];
    g.dense = make_group(store, kind, mesh.holders_group(holders, at.inner), rank, options);
    if (mesh.dims().ep > 1)
      g.experts = make_group(store, kind + "/experts",
                             mesh.expert_holders_group(holders, at.expert_rank, at.inner), rank, options);
  }
  return groups;
}

}  // namespace dualpipe::parallel
