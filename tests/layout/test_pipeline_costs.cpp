// The time model's communication terms, checked by hand.
#include <gtest/gtest.h>

#include "dualpipe/layout/layout.h"
#include "layout/pipeline_costs.h"

namespace dualpipe::layout {
namespace {

// DeepSeek-V3's node-limited routing on its published layout: EP64 spans 8 nodes of 8 GPUs. Without the limit, a
// token's 8 copies leave the node with probability 56/64: 8 x 7/8 = 7 activations per token on the network. With
// at most 4 nodes per token, each remote node is reached once: 4 x 7/8 = 3.5, half as much. The network is the
// bottleneck both ways (NVLink moves at most 8 x 63/64 activations at 4x the bandwidth), so the all-to-all's
// transfer halves; its latency (NCCL's base 8.4 us and one network step of 9.6 us: the messages go at once) stays.
TEST(PipelineCosts, NodeLimitedRoutingHalvesDeepSeekV3sAllToAll) {
  ModelSpec limited = model_spec("deepseek-v3");
  ASSERT_EQ(limited.max_nodes_per_token, 4);
  ModelSpec unlimited = limited;
  unlimited.max_nodes_per_token = 0;
  const ClusterSpec cluster = cluster_spec("h800x2048");
  Layout l;
  l.pp = 16, l.dp = 128, l.ep = 64, l.schedule = "1f1b", l.zero = 1, l.recompute = Recompute::Full;
  const double with_limit = pipeline_costs(limited, cluster, l, false).ep;
  const double without = pipeline_costs(unlimited, cluster, l, false).ep;

  // By hand, without the limit: per MoE layer, 2 all-to-alls each way of 7 x 4096 x 7168 x 2 bytes per
  // micro-batch over 50 GB/s at 80%; 58 MoE layers.
  const double transfer = 7.0 * 4096 * 7168 * 2 / (50e9 * 0.8), latency = (8.4 + 9.6) * 1e-6;
  EXPECT_NEAR(without, 58 * 4 * (latency + transfer), 1e-9 * without);
  EXPECT_NEAR(with_limit, 58 * 4 * (latency + transfer / 2), 1e-9 * with_limit);
}

// Inside a node the limit changes nothing: no copy leaves it.
TEST(PipelineCosts, NodeLimitedRoutingInsideANodeChangesNothing) {
  ModelSpec limited = model_spec("deepseek-v3");
  ModelSpec unlimited = limited;
  unlimited.max_nodes_per_token = 0;
  const ClusterSpec cluster = cluster_spec("h800x2048");
  Layout l;
  l.pp = 16, l.dp = 128, l.ep = 8, l.schedule = "1f1b", l.zero = 1, l.recompute = Recompute::Full;
  EXPECT_DOUBLE_EQ(pipeline_costs(limited, cluster, l, false).ep, pipeline_costs(unlimited, cluster, l, false).ep);
}

}  // namespace
}  // namespace dualpipe::layout
