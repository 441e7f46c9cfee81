// The time of NCCL's collectives on a cluster's links (docs/layout.md, "The time model"): a group of ranks in one
// node talks over NVLink, one that spans nodes over the network at each GPU's share of it; each collective pays a
// latency per step of its algorithm and its bytes at the link's bandwidth times the cluster's link efficiency.
#pragma once

#include "dualpipe/layout/cluster_spec.h"

namespace dualpipe::layout {

// The link of a group of `size` ranks whose neighbours are `stride` ranks apart (ranks numbered node by node).
struct GroupLink {
  double bytes_per_second = 0;  // at the cluster's link efficiency
  double step_seconds = 0;      // latency of one step of a ring
  bool crosses_nodes = false;
};
GroupLink group_link(const ClusterSpec& cluster, int size, int stride);

// `bytes`: the whole tensor (gathered, or reduced). Ring: n - 1 steps moving (n - 1)/n of it.
double all_gather_seconds(const ClusterSpec& cluster, double bytes, int size, int stride);
double reduce_scatter_seconds(const ClusterSpec& cluster, double bytes, int size, int stride);
// The faster of a ring (2(n - 1) steps, 2(n - 1)/n of the bytes) and a tree (2 log2 n steps, twice the bytes):
// NCCL picks the tree where latency dominates, small tensors over many ranks.
double all_reduce_seconds(const ClusterSpec& cluster, double bytes, int size, int stride);

// An all-to-all over `ep` ranks numbered node by node, moving `token_bytes` per token to each of its `copies`
// experts, for `tokens` tokens: the share that leaves its node goes over the network while the rest takes NVLink,
// at once. With node-limited routing (max_nodes > 0), a token crosses the network once per remote node it
// reaches, at most max_nodes of them, and every copy then takes NVLink once inside its node.
double all_to_all_seconds(const ClusterSpec& cluster, int ep, double bytes_per_copy, int copies, int max_nodes);

}  // namespace dualpipe::layout
