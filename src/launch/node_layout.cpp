// Node layout arithmetic and the torchrun environment (see node_layout.h).
#include "dualpipe/launch/node_layout.h"

#include "dualpipe/util/error.h"

namespace dualpipe::launch {
namespace {

void check_nodes(int nnodes, int node_rank) {
  DUALPIPE_REQUIRE(nnodes >= 1 && nnodes <= kMaxNodes, "--nnodes must be between 1 and ", kMaxNodes, ", got ",
                   nnodes);
  DUALPIPE_REQUIRE(node_rank >= 0 && node_rank < nnodes, "--node-rank must be below --nnodes (", nnodes,
                   "): the nodes are numbered 0 to ", nnodes - 1, ", got ", node_rank);
}

}  // namespace

NodeLayout layout_per_node(int nnodes, int node_rank, int nproc_per_node) {
  check_nodes(nnodes, node_rank);
  DUALPIPE_REQUIRE(nproc_per_node >= 1 && nproc_per_node <= kMaxLocalRanks,
                   "--nproc-per-node must be between 1 and ", kMaxLocalRanks, ", got ", nproc_per_node);
  return NodeLayout{nnodes, node_rank, nproc_per_node, nnodes * nproc_per_node};
}

NodeLayout layout_for_world(int world_size, int nnodes, int node_rank, int nproc_per_node) {
  check_nodes(nnodes, node_rank);
  DUALPIPE_REQUIRE(world_size >= 1, "the job needs at least one rank, got ", world_size);
  DUALPIPE_REQUIRE(world_size >= nnodes, "a world of ", world_size, " ranks cannot be split over --nnodes ", nnodes,
                   ": every node needs at least one rank");
  // Even split: L = ceil(world / nnodes) per node, the last node takes what is left.
  const bool even = nproc_per_node == 0;
  if (even) nproc_per_node = (world_size + nnodes - 1) / nnodes;
  // Named as what was asked for (the world's size), not as a --nproc-per-node nobody gave.
  DUALPIPE_REQUIRE(!even || nproc_per_node <= kMaxLocalRanks, "a world of ", world_size, " ranks on --nnodes ", nnodes,
                   " puts ", nproc_per_node, " ranks on each machine, above the limit of ", kMaxLocalRanks,
                   " processes per machine: use more machines (--nnodes) or fewer ranks");
  NodeLayout layout = layout_per_node(nnodes, node_rank, nproc_per_node);
  layout.world_size = world_size;
  DUALPIPE_REQUIRE(static_cast<long long>(nproc_per_node) * nnodes >= world_size &&
                       static_cast<long long>(nproc_per_node) * (nnodes - 1) < world_size,
                   even ? "an even split" : detail::concat("--nproc-per-node ", nproc_per_node), " on --nnodes ",
                   nnodes, " does not fit a world of ", world_size, " ranks: node K runs ranks K*", nproc_per_node, " to K*", nproc_per_node, "+",
                   nproc_per_node - 1, ", so every node must get at least one rank and the nodes must hold all ",
                   world_size);
  return layout;
}

std::vector<std::string> rank_environment(const NodeLayout& layout, int local, const std::string& master_addr,
                                          int master_port, int restart_count, int max_restarts) {
  const int rank = layout.first_rank() + local;
  auto var = [](const char* name, const auto& value) { return detail::concat(name, "=", value); };
  return {var("RANK", rank),
          var("LOCAL_RANK", local),
          var("GROUP_RANK", layout.node_rank),
          var("ROLE_RANK", rank),
          var("ROLE_NAME", "default"),
          var("LOCAL_WORLD_SIZE", layout.local_ranks()),
          var("WORLD_SIZE", layout.world_size),
          var("GROUP_WORLD_SIZE", layout.nnodes),
          var("ROLE_WORLD_SIZE", layout.world_size),
          var("MASTER_ADDR", master_addr),
          var("MASTER_PORT", master_port),
          var("TORCHELASTIC_RESTART_COUNT", restart_count),
          var("TORCHELASTIC_MAX_RESTARTS", max_restarts),
          var("TORCHELASTIC_RUN_ID", "none"),
          var("TORCHELASTIC_USE_AGENT_STORE", "False")};
}

const std::vector<std::string>& rank_environment_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> result;
    for (const std::string& entry : rank_environment(NodeLayout{}, 0, "", 0, 0, 0))
      result.push_back(entry.substr(0, entry.find('=')));
    return result;
  }();
  return names;
}

}  // namespace dualpipe::launch
