// The time model's communication terms, checked by hand.
#include <gtest/gtest.h>

#include "dualpipe/layout/layout.h"
#include "layout/pipeline_costs.h"

namespace dualpipe::layout {
namespace {

// DeepSeek-V3's node-limited routing on its published layout: EP64 spans 8 nodes of 8 GPUs. Without the limit, a
// token's 8 copies leave the node with probability 56/64: 8 x 7/8 = 7 activations per token on the network. With
// at most 4 nodes per token, each remote node is reached once: 4 x 7/8 = 3.5, half as much. The network is the
// bottleneck both ways (NVLink moves at most 8 x 63/64 activations at 4x the bandwidth), so the all-to-all halves.
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
  ASSERT_GT(without, 0);
  EXPECT_NEAR(with_limit / without, 0.5, 1e-12);

  // By hand, without the limit: per MoE layer, 2 all-to-alls each way of 7 x 4096 x 7168 x 2 bytes per
  // micro-batch over 50 GB/s at 80%; 58 MoE layers.
  const double per_all_to_all = 7.0 * 4096 * 7168 * 2 / (50e9 * 0.8);
  EXPECT_NEAR(without, 58 * 4 * per_all_to_all, 1e-9 * without);
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
