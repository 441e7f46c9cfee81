// The c10d groups of a process mesh (mesh.h), made once per rank and named, as Megatron's parallel_state does:
// this rank's pipeline, its data-parallel group and its expert-parallel group, each a sub-group of one world.
// Library users with groups of their own (NCCL, or another layout) fill MeshGroups themselves.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "dualpipe/parallel/mesh.h"

namespace dualpipe::parallel {

struct MeshGroups {
  // Each group's ranks are the group's own: the pipeline rank p, the replica d, the expert rank.
  c10::intrusive_ptr<c10d::ProcessGroup> pipeline;
  c10::intrusive_ptr<c10d::ProcessGroup> data_parallel;
  c10::intrusive_ptr<c10d::ProcessGroup> expert;
  // The same ranks as `expert`, for the all-to-alls of backward passes: with forward-backward overlap a forward
  // and a backward run at once, and each group must see its collectives in the same order on every member.
  c10::intrusive_ptr<c10d::ProcessGroup> expert_backward;
  // The ranks holding this rank's experts in the other EP groups (mesh.h): they all-reduce expert gradients.
  c10::intrusive_ptr<c10d::ProcessGroup> expert_data_parallel;
};

// Makes `rank`'s three groups as Gloo groups over `store` (each under its own key prefix, so the world's keys and
// other groups' never mix), every rank of the world calling it at the same time. `interface`: the network
// interface for Gloo (empty: the host name's address); GlooCommunicator::interface() gives the world's.
MeshGroups make_gloo_mesh_groups(const c10::intrusive_ptr<c10d::Store>& store, const ProcessMesh& mesh, int rank,
                                 std::chrono::milliseconds timeout, const std::string& interface);

// The groups that reduce one stage's gradients when its copies sit on several pipeline ranks (DualPipe and Chimera
// keep stage s on p and P-1-p): every holder of the stage in every replica, so that one all-reduce sums the copies
// and averages the replicas in the same bucket.
struct StageCopyGroups {
  c10::intrusive_ptr<c10d::ProcessGroup> dense;    // ProcessMesh::holders_group
  c10::intrusive_ptr<c10d::ProcessGroup> experts;  // ProcessMesh::expert_holders_group; null with EP 1
};

// `pipeline_ranks_of_stage[s]`: the distinct pipeline ranks holding stage s (from the schedule's placement). Makes
// the groups of each stage `rank` holds on more than one pipeline rank, keyed by stage, every rank of the world
// calling it at the same time. A group's members hold the same stages, so they make their groups in the same
// (stage) order.
std::map<int, StageCopyGroups> make_gloo_stage_copy_groups(const c10::intrusive_ptr<c10d::Store>& store,
                                                           const ProcessMesh& mesh, int rank,
                                                           const std::vector<std::vector<int>>& pipeline_ranks_of_stage,
                                                           std::chrono::milliseconds timeout,
                                                           const std::string& interface);

}  // namespace dualpipe::parallel
