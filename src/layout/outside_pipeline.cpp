#include "layout/outside_pipeline.h"

#include <algorithm>

#include "layout/collectives.h"

namespace dualpipe::layout {

DataParallelTime data_parallel_time(const ClusterSpec& cluster, const Layout& l, ZeroStage zero,
                                    double dense_params, double expert_params, double forward, double backward) {
  // Dense parameters are replicated over dp x cp ranks, experts over the ranks holding the same experts.
  const int dense_ranks = l.dp * l.cp, expert_ranks = l.tp * l.cp * l.dp / l.ep;
  // One pass of 16-bit values of every parameter this rank holds over its group: a gather or a reduce-scatter.
  const double pass = all_gather_seconds(cluster, 2 * dense_params, dense_ranks, l.tp) +
                      all_gather_seconds(cluster, 2 * expert_params, expert_ranks, l.ep);
  const double all_reduce = all_reduce_seconds(cluster, 2 * dense_params, dense_ranks, l.tp) +
                            all_reduce_seconds(cluster, 2 * expert_params, expert_ranks, l.ep);
  if (!l.dp_overlap) forward = backward = 0;
  const int m = l.microbatches;
  if (!shards_gradients(zero)) return {all_reduce, std::max(0.0, all_reduce - backward)};
  if (!shards_parameters(zero)) return {m * pass + pass, m * std::max(0.0, pass - backward) + pass};
  return {3 * m * pass, m * std::max(0.0, 3 * pass - forward - backward)};
}

double update_seconds(const ClusterSpec& cluster, double parameters) {
  // Adam reads the fp32 master weight, momentum, variance and gradient and writes the first three and the 16-bit
  // weight.
  constexpr double kAdamBytesPerParameter = 4 * 4 + 3 * 4 + 2;
  double seconds = 0;
  if (cluster.update_ns_per_parameter > 0) {
    seconds = parameters * cluster.update_ns_per_parameter * 1e-9;
  } else if (cluster.hbm_gbps > 0) {
    seconds = parameters * kAdamBytesPerParameter / (cluster.hbm_gbps * 1e9 * cluster.memory_efficiency);
  }
  return seconds * (cluster.host_cores > 0 ? std::max(1.0, double(cluster.gpus) / cluster.host_cores) : 1.0);
}

}  // namespace dualpipe::layout
