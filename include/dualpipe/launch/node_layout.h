// Which ranks of a job run on this machine, by torchrun's multi-node contract: --nnodes machines, this one
// --node-rank, --nproc-per-node ranks on each. Node K runs the global ranks K*L .. K*L+L-1 (L = nproc_per_node),
// cut at the world size, so a world that does not divide evenly leaves the last node fewer ranks.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace dualpipe::launch {

struct NodeLayout {
  int nnodes = 1;
  int node_rank = 0;
  int nproc_per_node = 1;
  int world_size = 1;

  int first_rank() const { return node_rank * nproc_per_node; }
  int local_ranks() const { return std::min(nproc_per_node, world_size - first_rank()); }
};

// The largest job a launcher starts: more is a typo, and it bounds the launcher's open pipes.
constexpr int kMaxLocalRanks = 1024;
constexpr int kMaxNodes = 4096;

// nnodes × nproc_per_node ranks (dualpipe launch). Throws InvalidArgument naming the flag and the rule.
NodeLayout layout_per_node(int nnodes, int node_rank, int nproc_per_node);
// `world_size` ranks split over the nodes (dualpipe train): nproc_per_node of them per node, or with 0
// ceil(world_size / nnodes), the last node taking the rest. Every node must get at least one rank.
NodeLayout layout_for_world(int world_size, int nnodes, int node_rank, int nproc_per_node);

// The variables torchrun gives each worker (torch.distributed.run's documented environment), for local rank
// `local` of this node: RANK, LOCAL_RANK, GROUP_RANK, ROLE_RANK, ROLE_NAME, LOCAL_WORLD_SIZE, WORLD_SIZE,
// GROUP_WORLD_SIZE, ROLE_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RESTART_COUNT,
// TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_RUN_ID and TORCHELASTIC_USE_AGENT_STORE (False: rank 0 hosts the
// store, not the launcher), as "NAME=value".
std::vector<std::string> rank_environment(const NodeLayout& layout, int local, const std::string& master_addr,
                                          int master_port, int restart_count, int max_restarts);
// The names rank_environment() sets: the launcher drops them from its own environment before adding them.
const std::vector<std::string>& rank_environment_names();

}  // namespace dualpipe::launch
