// Process mesh layout (see mesh.h).
#include "dualpipe/parallel/mesh.h"

#include "dualpipe/util/error.h"

namespace dualpipe::parallel {

namespace {
constexpr int kMaxWorld = 65536;
}

std::string MeshShape::to_string() const {
  return detail::concat("PP=", pp, " x DP=", dp, ep > 1 ? detail::concat(" (EP=", ep, ")") : std::string());
}

ProcessMesh::ProcessMesh(MeshShape shape) : shape_(shape) {
  DUALPIPE_REQUIRE(shape.pp >= 1, "--pp must be at least 1, got ", shape.pp);
  DUALPIPE_REQUIRE(shape.dp >= 1, "--dp must be at least 1, got ", shape.dp);
  DUALPIPE_REQUIRE(shape.ep >= 1, "--ep must be at least 1, got ", shape.ep);
  DUALPIPE_REQUIRE(static_cast<long long>(shape.pp) * shape.dp <= kMaxWorld, "--pp ", shape.pp, " x --dp ", shape.dp,
                   " is ", static_cast<long long>(shape.pp) * shape.dp, " ranks, above the limit of ", kMaxWorld);
  DUALPIPE_REQUIRE(shape.dp % shape.ep == 0, "--ep ", shape.ep, " must divide --dp ", shape.dp,
                   ": expert parallelism runs across the data-parallel replicas of one stage");
}

void ProcessMesh::check_rank(int rank) const {
  DUALPIPE_CHECK(rank >= 0 && rank < world_size(), "rank ", rank, " outside a mesh of ", world_size());
}

int ProcessMesh::rank_of(int pipeline_rank, int replica) const {
  DUALPIPE_CHECK(pipeline_rank >= 0 && pipeline_rank < shape_.pp && replica >= 0 && replica < shape_.dp);
  return replica * shape_.pp + pipeline_rank;
}

MeshCoordinates ProcessMesh::coordinates(int rank) const {
  check_rank(rank);
  MeshCoordinates c;
  c.pipeline_rank = rank % shape_.pp;
  c.replica = rank / shape_.pp;
  c.expert_rank = c.replica % shape_.ep;
  return c;
}

std::vector<int> ProcessMesh::pipeline_group(int replica) const {
  std::vector<int> ranks;
  for (int p = 0; p < shape_.pp; ++p) ranks.push_back(rank_of(p, replica));
  return ranks;
}

std::vector<int> ProcessMesh::data_parallel_group(int pipeline_rank) const { return holders_group({pipeline_rank}); }

std::vector<int> ProcessMesh::expert_group(int rank) const {
  const MeshCoordinates c = coordinates(rank);
  std::vector<int> ranks;
  const int first = c.replica - c.expert_rank;
  for (int d = first; d < first + shape_.ep; ++d) ranks.push_back(rank_of(c.pipeline_rank, d));
  return ranks;
}

std::vector<int> ProcessMesh::expert_data_parallel_group(int rank) const {
  const MeshCoordinates c = coordinates(rank);
  return expert_holders_group({c.pipeline_rank}, c.expert_rank);
}

std::vector<int> ProcessMesh::holders_group(const std::vector<int>& pipeline_ranks) const {
  return holders(pipeline_ranks, 0, 1);
}

std::vector<int> ProcessMesh::expert_holders_group(const std::vector<int>& pipeline_ranks, int expert_rank) const {
  DUALPIPE_CHECK(expert_rank >= 0 && expert_rank < shape_.ep, "expert rank ", expert_rank, " outside an EP group of ",
                 shape_.ep);
  return holders(pipeline_ranks, expert_rank, shape_.ep);
}

std::vector<int> ProcessMesh::holders(const std::vector<int>& pipeline_ranks, int first_replica, int stride) const {
  std::vector<int> ranks;
  for (int d = first_replica; d < shape_.dp; d += stride)
    for (int p : pipeline_ranks) ranks.push_back(rank_of(p, d));
  return ranks;
}

}  // namespace dualpipe::parallel
