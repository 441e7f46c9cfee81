// Gloo sub-groups of a process mesh (see process_groups.h).
#include "dualpipe/parallel/process_groups.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <algorithm>

#include "dualpipe/error.h"

namespace dualpipe::parallel {
namespace {

// The group of `ranks` as seen by `rank`, one of them. The prefix names the group by kind and its first rank,
// which every member computes the same.
c10::intrusive_ptr<c10d::ProcessGroup> make_group(const c10::intrusive_ptr<c10d::Store>& store, const char* kind,
                                                  const std::vector<int>& ranks, int rank,
                                                  std::chrono::milliseconds timeout, const std::string& interface) {
  const auto me = std::find(ranks.begin(), ranks.end(), rank);
  DUALPIPE_CHECK(me != ranks.end(), "rank ", rank, " is not in its own ", kind, " group");
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(interface.empty() ? c10d::ProcessGroupGloo::createDefaultDevice()
                                               : c10d::ProcessGroupGloo::createDeviceForInterface(interface));
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>(
      detail::concat("dualpipe/group/", kind, "/", ranks.front()), store);
  return c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, static_cast<int>(me - ranks.begin()),
                                                     static_cast<int>(ranks.size()), options);
}

}  // namespace

MeshGroups make_gloo_mesh_groups(const c10::intrusive_ptr<c10d::Store>& store, const ProcessMesh& mesh, int rank,
                                 std::chrono::milliseconds timeout, const std::string& interface) {
  const MeshCoordinates at = mesh.coordinates(rank);
  // The same order on every rank: a group forms once all its members reach it, and every member reaches the
  // pipeline group first, then the DP group, then the EP groups, so no rank waits on one that waits elsewhere.
  MeshGroups groups;
  groups.pipeline = make_group(store, "pipeline", mesh.pipeline_group(at.replica), rank, timeout, interface);
  groups.data_parallel =
      make_group(store, "data_parallel", mesh.data_parallel_group(at.pipeline_rank), rank, timeout, interface);
  groups.expert = make_group(store, "expert", mesh.expert_group(rank), rank, timeout, interface);
  groups.expert_backward = make_group(store, "expert_backward", mesh.expert_group(rank), rank, timeout, interface);
  groups.expert_data_parallel =
      make_group(store, "expert_data_parallel", mesh.expert_data_parallel_group(rank), rank, timeout, interface);
  return groups;
}

}  // namespace dualpipe::parallel
