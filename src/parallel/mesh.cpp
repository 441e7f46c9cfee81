// Process mesh layout (see mesh.h).
#include "dualpipe/parallel/mesh.h"

#include "dualpipe/util/error.h"

namespace dualpipe::parallel {

namespace {
constexpr int64_t kMaxWorld = 65536;
}

ProcessMesh::ProcessMesh(ParallelDims dims) : dims_(dims) {
  check(dims, DimsSpelling::Options);
  check_world_size(dims, kMaxWorld, DimsSpelling::Options);
}

void ProcessMesh::check_rank(int rank) const {
  DUALPIPE_CHECK(rank >= 0 && rank < world_size(), "rank ", rank, " outside a mesh of ", world_size());
}

int ProcessMesh::rank_of(int pipeline_rank, int replica, int inner_rank) const {
  DUALPIPE_CHECK(pipeline_rank >= 0 && pipeline_rank < dims_.pp && replica >= 0 && replica < dims_.dp &&
                 inner_rank >= 0 && inner_rank < dims_.inner());
  return (replica * dims_.pp + pipeline_rank) * dims_.inner() + inner_rank;
}

MeshCoordinates ProcessMesh::coordinates(int rank) const {
  check_rank(rank);
  MeshCoordinates c;
  c.inner = rank % dims_.inner();
  c.tensor_rank = c.inner % dims_.tp;
  c.context_rank = c.inner / dims_.tp;
  const int model_rank = rank / dims_.inner();  // the rank in the mesh without tensor and context parallelism
  c.pipeline_rank = model_rank % dims_.pp;
  c.replica = model_rank / dims_.pp;
  c.expert_rank = c.replica % dims_.ep;
  return c;
}

std::vector<int> ProcessMesh::pipeline_group(int replica, int inner_rank) const {
  std::vector<int> ranks;
  for (int p = 0; p < dims_.pp; ++p) ranks.push_back(rank_of(p, replica, inner_rank));
  return ranks;
}

std::vector<int> ProcessMesh::data_parallel_group(int pipeline_rank, int inner_rank) const {
  return holders_group({pipeline_rank}, inner_rank);
}

std::vector<int> ProcessMesh::tensor_group(int rank) const {
  const MeshCoordinates c = coordinates(rank);
  std::vector<int> ranks;
  for (int t = 0; t < dims_.tp; ++t) ranks.push_back(rank_of(c.pipeline_rank, c.replica, c.context_rank * dims_.tp + t));
  return ranks;
}

std::vector<int> ProcessMesh::context_group(int rank) const {
  const MeshCoordinates c = coordinates(rank);
  std::vector<int> ranks;
  for (int k = 0; k < dims_.cp; ++k) ranks.push_back(rank_of(c.pipeline_rank, c.replica, k * dims_.tp + c.tensor_rank));
  return ranks;
}

std::vector<int> ProcessMesh::expert_group(int rank) const {
  const MeshCoordinates c = coordinates(rank);
  std::vector<int> ranks;
  const int first = c.replica - c.expert_rank;
  for (int d = first; d < first + dims_.ep; ++d) ranks.push_back(rank_of(c.pipeline_rank, d, c.inner));
  return ranks;
}

std::vector<int> ProcessMesh::expert_data_parallel_group(int rank) const {
  const MeshCoordinates c = coordinates(rank);
  return expert_holders_group({c.pipeline_rank}, c.expert_rank, c.inner);
}

std::vector<int> ProcessMesh::holders_group(const std::vector<int>& pipeline_ranks, int inner_rank) const {
  return holders(pipeline_ranks, 0, 1, inner_rank);
}

std::vector<int> ProcessMesh::expert_holders_group(const std::vector<int>& pipeline_ranks, int expert_rank,
                                                   int inner_rank) const {
  DUALPIPE_CHECK(expert_rank >= 0 && expert_rank < dims_.ep, "expert rank ", expert_rank, " outside an EP group of ",
                 dims_.ep);
  return holders(pipeline_ranks, expert_rank, dims_.ep, inner_rank);
}

std::vector<int> ProcessMesh::holders(const std::vector<int>& pipeline_ranks, int first_replica, int stride,
                                      int inner_rank) const {
  std::vector<int> ranks;
  for (int d = first_replica; d < dims_.dp; d += stride)
    for (int p : pipeline_ranks) ranks.push_back(rank_of(p, d, inner_rank));
  return ranks;
}

}  // namespace dualpipe::parallel
