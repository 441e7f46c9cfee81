// The process mesh of a hybrid-parallel job: P pipeline stages (PP) x D data-parallel replicas (DP) x C context-
// parallel ranks (CP) x T tensor-parallel ranks (TP), with expert parallelism (EP) in groups of E among the
// replicas of one stage, as in DeepSeek-V3 (E divides D: parallel_dims.h). Layout only, no LibTorch: which global rank holds which
// (stage rank, replica, context rank, tensor rank), and the rank lists of every group.
//
// Rank r = ((d * P + p) * C + c) * T + t. Tensor parallelism is innermost, as in Megatron: its all-reduces run
// inside every block, twice per layer each way, so its T ranks are consecutive and share a machine. Context
// parallelism next (its ring passes K/V blocks once per layer each way), as Megatron orders them. The C x T ranks
// of one (stage rank, replica) are its "inner" ranks, numbered c * T + t; the group functions below that take an
// inner rank give that inner rank's groups (with C = 1 it is the tensor rank). Then the P ranks of
// one pipeline replica, so with `--nproc-per-node P x T` each machine holds whole pipelines and the pipeline's
// point-to-point traffic stays on the machine, while the gradient all-reduce (DP) and the expert all-to-all (EP)
// cross machines. (Megatron puts DP inside PP instead; the pipeline's traffic is the heavier here.) Each group
// below but the tensor and context groups is among the ranks of one inner rank. Example, P=2, D=4, E=2, T=1:
//
//            replica d=0  d=1  d=2  d=3
//   stage rank p=0  r=0   r=2  r=4  r=6      DP group of p=0: {0, 2, 4, 6}; EP groups: {0, 2}, {4, 6}
//   stage rank p=1  r=1   r=3  r=5  r=7      DP group of p=1: {1, 3, 5, 7}; EP groups: {1, 3}, {5, 7}
//   pipeline of d=0: {0, 1}; d=1: {2, 3}; ...
//   expert-data-parallel groups (the same experts in each EP group): of r=0 {0, 4}, of r=2 {2, 6}, ...
#pragma once

#include <string>
#include <vector>

#include "dualpipe/parallel/parallel_dims.h"

namespace dualpipe::parallel {


// Where one rank stands.
struct MeshCoordinates {
  int pipeline_rank = 0;  // p: its place in its replica's pipeline
  int replica = 0;        // d
  int expert_rank = 0;    // its place in its EP group: d mod E
  int tensor_rank = 0;    // t: its shard of every tensor-parallel layer
  int context_rank = 0;   // c: its tokens of every sequence
  int inner = 0;          // c * T + t
};

class ProcessMesh {
 public:
  // Throws InvalidArgument naming the value and the rule (parallel_dims.h's, as --options).
  explicit ProcessMesh(ParallelDims dims);

  const ParallelDims& dims() const { return dims_; }
  int world_size() const { return static_cast<int>(dims_.world_size()); }

  // `inner_rank`: c * T + t (the tensor rank without context parallelism).
  int rank_of(int pipeline_rank, int replica, int inner_rank = 0) const;
  MeshCoordinates coordinates(int rank) const;

  // The ranks of replica d's pipeline of tensor rank t, in pipeline order.
  std::vector<int> pipeline_group(int replica, int inner_rank = 0) const;
  // The ranks holding pipeline rank p (tensor rank t) in every replica, by replica: they all-reduce p's gradients.
  std::vector<int> data_parallel_group(int pipeline_rank, int inner_rank = 0) const;
  // The T ranks sharding the layers of `rank`'s stages, by tensor rank.
  std::vector<int> tensor_group(int rank) const;
  // The C ranks sharing out the sequences of `rank`'s stages (with its tensor rank), by context rank.
  std::vector<int> context_group(int rank) const;
  // The EP group of `rank`: the E replicas d - d mod E .. of its pipeline rank, by expert rank.
  std::vector<int> expert_group(int rank) const;
  // The ranks holding the same experts as `rank`: its pipeline rank, with its expert rank, in each of the D/E EP
  // groups. They all-reduce the expert gradients, as the DP group does the others.
  std::vector<int> expert_data_parallel_group(int rank) const;

  // A stage whose copies sit on several pipeline ranks (DualPipe and Chimera put stage s on p and P-1-p): the
  // ranks holding it in every replica, by replica then by `pipeline_ranks`' order. One all-reduce over them sums
  // the copies' gradients and the replicas' at once. data_parallel_group(p) is holders_group({p}).
  std::vector<int> holders_group(const std::vector<int>& pipeline_ranks, int inner_rank = 0) const;
  // The same for the stage's experts of expert rank `expert_rank`: the holders in the replicas with that expert
  // rank. expert_data_parallel_group(rank) is expert_holders_group({p}, its expert rank).
  std::vector<int> expert_holders_group(const std::vector<int>& pipeline_ranks, int expert_rank,
                                        int inner_rank = 0) const;

 private:
  void check_rank(int rank) const;
  // The ranks at `pipeline_ranks` in replicas first_replica, first_replica + stride, ...
  std::vector<int> holders(const std::vector<int>& pipeline_ranks, int first_replica, int stride,
                           int inner_rank) const;
  ParallelDims dims_;
};

}  // namespace dualpipe::parallel
