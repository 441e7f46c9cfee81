// The c10d groups of a process mesh (mesh.h), made once per rank and named, as Megatron's parallel_state does:
// this rank's pipeline, its data-parallel group, its expert-parallel and tensor-parallel groups, each a sub-group
// of one world.
// Library users with groups of their own (NCCL, or another layout) fill MeshGroups themselves.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "dualpipe/comm/backend.h"
#include "dualpipe/parallel/mesh.h"

namespace dualpipe::parallel {

// The pipeline's messages by direction (comm/directional_communicator.h), over the pipeline group's ranks: what
// NCCL needs, and the Gloo test mode of NCCL's rules (DUALPIPE_NCCL_RULES=1).
struct PipelineChannels {
  c10::intrusive_ptr<c10d::ProcessGroup> upward;    // to higher pipeline ranks
  c10::intrusive_ptr<c10d::ProcessGroup> downward;  // to lower ones
  explicit operator bool() const { return upward && downward; }
};

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
  // Optional. When set, the trainer sends the pipeline's messages over them instead of `pipeline`.
  PipelineChannels pipeline_channels;
  // The T ranks of this rank's tensor-parallel layers (ProcessMesh::tensor_group; one rank without TP). Optional
  // for a library user's groups without TP.
  c10::intrusive_ptr<c10d::ProcessGroup> tensor;
  // The same ranks as `tensor`, for the collectives of backward passes (as `expert_backward`).
  c10::intrusive_ptr<c10d::ProcessGroup> tensor_backward;
  // The C ranks sharing out this rank's sequences (ProcessMesh::context_group), and the same ranks for backward
  // passes. Optional, as `tensor`.
  c10::intrusive_ptr<c10d::ProcessGroup> context;
  c10::intrusive_ptr<c10d::ProcessGroup> context_backward;
};

// How the groups are made: the backend (comm/backend.h), and for Gloo the network interface (empty: the host
// name's address); GlooCommunicator::interface() gives the world's.
struct GroupOptions {
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
  std::string interface;
  comm::BackendKind backend = comm::BackendKind::gloo;
  int cuda_device = 0;  // NCCL: this rank's GPU
  // Make MeshGroups::pipeline_channels too (always with NCCL).
  bool pipeline_channels = false;
};

// Makes `rank`'s groups over `store` (each under its own key prefix, so the world's keys and other groups' never
// mix), every rank of the world calling it at the same time.
MeshGroups make_mesh_groups(const c10::intrusive_ptr<c10d::Store>& store, const ProcessMesh& mesh, int rank,
                            const GroupOptions& options);

// The same, as Gloo groups.
MeshGroups make_gloo_mesh_groups(const c10::intrusive_ptr<c10d::Store>& store, const ProcessMesh& mesh, int rank,
                                 std::chrono::milliseconds timeout, const std::string& interface);

// The two channels of the pipeline of `ranks` (world ranks, this rank among them), every member calling it at the
// same time. With NCCL, their communicators are made per pair at first use (DirectionalCommunicator::connect).
PipelineChannels make_pipeline_channels(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                                        int rank, const GroupOptions& options);

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
std::map<int, StageCopyGroups> make_stage_copy_groups(const c10::intrusive_ptr<c10d::Store>& store,
                                                      const ProcessMesh& mesh, int rank,
                                                      const std::vector<std::vector<int>>& pipeline_ranks_of_stage,
                                                      const GroupOptions& options);

}  // namespace dualpipe::parallel
