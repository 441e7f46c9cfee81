// Process mesh layout (see mesh.h).
#include "dualpipe/parallel/mesh.h"

#include "dualpipe/util/error.h"

namespace dualpipe::parallel {

namespace {
constexpr int kMaxWorld = 65536;
}

std::string MeshShape::to_string() const {
  return detail::concat("PP=", pp, " x DP=", dp, cp > 1 ? detail::concat(" x CP=", cp) : std::string(),
                        tp > 1 ? detail::concat(" x TP=", tp) : std::string(),
                        ep > 1 ? detail::concat(" (EP=", ep, ")") : std::string());
}

ProcessMesh::ProcessMesh(MeshShape shape) : shape_(shape) {
  DUALPIPE_REQUIRE(shape.pp >= 1, "--pp must be at least 1, got ", shape.pp);
  DUALPIPE_REQUIRE(shape.dp >= 1, "--dp must be at least 1, got ", shape.dp);
  DUALPIPE_REQUIRE(shape.ep >= 1, "--ep must be at least 1, got ", shape.ep);
  DUALPIPE_REQUIRE(shape.tp >= 1, "--tp must be at least 1, got ", shape.tp);
  DUALPIPE_REQUIRE(shape.cp >= 1, "--cp must be at least 1, got ", shape.cp);
  const long long world = static_cast<long long>(shape.pp) * shape.dp * shape.cp * shape.tp;
  DUALPIPE_REQUIRE(world <= kMaxWorld, "--pp ", shape.pp, " x --dp ", shape.dp,
                   shape.cp > 1 ? detail::concat(" x --cp ", shape.cp) : std::string(),
                   shape.tp > 1 ? detail::concat(" x --tp ", shape.tp) : std::string(), " is ", world,
                   " ranks, above the limit of ", kMaxWorld);
  DUALPIPE_REQUIRE(shape.dp % shape.ep == 0, "--ep ", shape.ep, " must divide --dp ", shape.dp,
                   ": expert parallelism runs across the data-parallel replicas of one stage");
}

void ProcessMesh::check_rank(int rank) const {
  DUALPIPE_CHECK(rank >= 0 && rank < world_size(), "rank ", rank, " outside a mesh of ", world_size());
}

int ProcessMesh::rank_of(int pipeline_rank, int replica, int inner_rank) const {
  DUALPIPE_CHECK(pipeline_rank >= 0 && pipeline_rank < shape_.pp && replica >= 0 && replica < shape_.dp &&
                 inner_rank >= 0 && inner_rank < shape_.inner());
  return (replica * shape_.pp + pipeline_rank) * shape_.inner() + inner_rank;
}

MeshCoordinates ProcessMesh::coordinates(int rank) const {
  check_rank(rank);
  MeshCoordinates c;
  c.inner = rank % shape_.inner();
  c.tensor_rank = c.inner % shape_.tp;
  c.context_rank = c.inner / shape_.tp;
  const int model_rank = rank / shape_.inner();  // the rank in the mesh without tensor and context parallelism
  c.pipeline_rank = model_rank % shape_.pp;
  c.replica = model_rank / shape_.pp;
  c.expert_rank = c.replica % shape_.ep;
  return c;
}

std::vector<int> ProcessMesh::pipeline_group(int replica, int inner_rank) const {
  std::vector<int> ranks;
  for (int p = 0; p < shape_.pp; ++p) ranks.push_back(rank_of(p, replica, inner_rank));
  return ranks;
}

std::vector<int> ProcessMesh::data_parallel_group(int pipeline_rank, int inner_rank) const {
  return holders_group({pipeline_rank}, inner_rank);
}

std::vector<int> ProcessMesh::tensor_group(int rank) const {
  const MeshCoordinates c = coordinates(rank);
  std::vector<int> ranks;
  for (int t = 0; t < shape_.tp; ++t) ranks.push_back(rank_of(c.pipeline_rank, c.replica, c.context_rank * shape_.tp + t));
  return ranks;
}

std::vector<int> ProcessMesh::context_group(int rank) const {
  const MeshCoordinates c = coordinates(rank);
  std::vector<int> ranks;
  for (int k = 0; k < shape_.cp; ++k) ranks.push_back(rank_of(c.pipeline_rank, c.replica, k * shape_.tp + c.tensor_rank));
  return ranks;
}

std::vector<int> ProcessMesh::expert_group(int rank) const {
  const MeshCoordinates c = coordinates(rank);
  std::vector<int> ranks;
  const int first = c.replica - c.expert_rank;
  for (int d = first; d < first + shape_.ep; ++d) ranks.push_back(rank_of(c.pipeline_rank, d, c.inner));
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
  DUALPIPE_CHECK(expert_rank >= 0 && expert_rank < shape_.ep, "expert rank ", expert_rank, " outside an EP group of ",
                 shape_.ep);
  return holders(pipeline_ranks, expert_rank, shape_.ep, inner_rank);
}

std::vector<int> ProcessMesh::holders(const std::vector<int>& pipeline_ranks, int first_replica, int stride,
                                      int inner_rank) const {
  std::vector<int> ranks;
  for (int d = first_replica; d < shape_.dp; d += stride)
    for (int p : pipeline_ranks) ranks.push_back(rank_of(p, d, inner_rank));
  return ranks;
}

}  // namespace dualpipe::parallel
