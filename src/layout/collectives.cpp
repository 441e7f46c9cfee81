#include "layout/collectives.h"

#include <algorithm>
#include <cmath>

namespace dualpipe::layout {

namespace {

// NCCL's base latency of a collective (src/graph/tuning.cc, ring with the Simple protocol), paid once.
constexpr double kCollectiveBaseSeconds = 8.4e-6;

double steps_and_bytes(const GroupLink& link, double steps, double bytes) {
  return kCollectiveBaseSeconds + steps * link.step_seconds + bytes / link.bytes_per_second;
}

}  // namespace

GroupLink group_link(const ClusterSpec& cluster, int size, int stride) {
  GroupLink link;
  link.crosses_nodes = double(size) * stride > cluster.gpus_per_node;
  link.bytes_per_second =
      (link.crosses_nodes ? cluster.inter_node_gbps : cluster.intra_node_gbps) * 1e9 * cluster.link_efficiency;
  link.step_seconds = 1e-6 * (link.crosses_nodes ? cluster.inter_node_latency_us : cluster.intra_node_latency_us);
  return link;
}

double all_gather_seconds(const ClusterSpec& cluster, double bytes, int size, int stride) {
  if (size <= 1) return 0;
  return steps_and_bytes(group_link(cluster, size, stride), size - 1, bytes * (size - 1) / size);
}

double reduce_scatter_seconds(const ClusterSpec& cluster, double bytes, int size, int stride) {
  return all_gather_seconds(cluster, bytes, size, stride);
}

double all_reduce_seconds(const ClusterSpec& cluster, double bytes, int size, int stride) {
  if (size <= 1) return 0;
  const GroupLink link = group_link(cluster, size, stride);
  const double ring = steps_and_bytes(link, 2.0 * (size - 1), 2 * bytes * (size - 1) / size);
  const double tree = steps_and_bytes(link, 2 * std::ceil(std::log2(size)), 2 * bytes);
  return std::min(ring, tree);
}

double all_to_all_seconds(const ClusterSpec& cluster, int ep, double bytes_per_copy, int copies, int max_nodes) {
  if (ep <= 1) return 0;
  const double bytes = bytes_per_copy * copies, moved = bytes * (ep - 1) / ep;
  const GroupLink nvlink = group_link(cluster, 1, 1);
  if (ep <= cluster.gpus_per_node)
    return kCollectiveBaseSeconds + nvlink.step_seconds + moved / nvlink.bytes_per_second;
  const GroupLink network = group_link(cluster, ep, 1);
  const double outside = double(ep - cluster.gpus_per_node) / (ep - 1);
  double over_network = moved * outside, over_nvlink = moved * (1 - outside);
  if (max_nodes > 0) {
    const double nodes = double(ep) / cluster.gpus_per_node;
    over_network = std::min(over_network, bytes_per_copy * std::min(max_nodes, copies) * (nodes - 1) / nodes);
    over_nvlink = moved;
  }
  // The messages to every peer go at once: one step of latency.
  return kCollectiveBaseSeconds + network.step_seconds +
         std::max(over_network / network.bytes_per_second, over_nvlink / nvlink.bytes_per_second);
}

}  // namespace dualpipe::layout
