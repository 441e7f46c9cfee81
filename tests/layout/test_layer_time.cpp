// The time model's pieces by hand (src/layout/layer_time.h, collectives.h): a matrix product's tiles, waves and
// roofline, NCCL's ring and tree, and the tensor-parallel traffic that runs behind the products.
#include <gtest/gtest.h>

#include "dualpipe/layout/layout.h"
#include "layout/collectives.h"
#include "layout/layer_time.h"

namespace dualpipe::layout {
namespace {

ClusterSpec a100() { return cluster_spec("a100-80gx64"); }  // 312 TFLOP/s, 2039 GB/s, 108 SMs, 0.72 and 0.80

constexpr double kA100Products = 312e12 * 0.72, kA100Memory = 2039e9 * 0.80;

TEST(MatmulSeconds, OneFullWaveRunsAtTheMatmulEfficiencyThenWritesItsOutput) {
  const ClusterSpec c = a100();
  // 12 x 9 tiles of 128 x 128: one wave of 108 exactly (k = 4096: 64 us of main loop, 12 us of inputs from
  // memory), then its 3.5 MB of output written: 2.2 us.
  const double m = 12 * 128, n = 9 * 128, k = 4096;
  EXPECT_NEAR(matmul_seconds(c, m, n, k), 2 * m * n * k / kA100Products + 2 * m * n / kA100Memory, 1e-15);
}

TEST(MatmulSeconds, ATileMoreThanAWaveRunsASecondWaveAndPadsItsTile) {
  const ClusterSpec c = a100();
  // m = 108 x 128 + 1: 109 tiles, the last holding one row, so two waves of 108 for 109 tiles of work.
  const double m = 108 * 128 + 1, n = 128, k = 4096;
  const double pad = m / (109 * 128.0), waves = 109.0 / 216;
  EXPECT_NEAR(matmul_seconds(c, m, n, k), 2 * m * n * k / (kA100Products * pad * waves) + 2 * m * n / kA100Memory,
              1e-15);
}

TEST(MatmulSeconds, AMatrixVectorProductStreamsItsMatrixFromMemory) {
  const ClusterSpec c = a100();
  // n = 1: 2mk FLOPs against 2mk bytes of matrix, and each tile holds one column of 128: the main loop (64.5 us)
  // is shorter than the matrix's read (69.5 us).
  const double m = 108 * 128, n = 1, k = 4096;
  EXPECT_NEAR(matmul_seconds(c, m, n, k), 2 * (m * k + k * n) / kA100Memory + 2 * m * n / kA100Memory, 1e-15);
}

// The output's write is what makes the share of peak follow the hardware: against the main loop it weighs as the
// GPU's balance (peak FLOP/s over HBM bytes/s, at the two efficiencies) over k, so an H100 (295 FLOP/byte at the
// datasheet's figures) loses 1.7 to 1.8 times the share an A100 (153) loses on the same product.
TEST(MatmulSeconds, TheOutputsWriteCostsAnH100MoreOfItsPeakThanAnA100) {
  const ClusterSpec h100 = cluster_spec("h100-sxmx64");
  const auto share_lost = [](const ClusterSpec& c, double k) {
    const double m = 8 * 1024, n = 8 * 1024;  // 4096 tiles: whole waves on neither GPU, the same fill for both k
    const double main_loop = matmul_seconds(c, m, n, k) - 2 * m * n / (c.hbm_gbps * 1e9 * c.memory_efficiency);
    return 1 - main_loop / matmul_seconds(c, m, n, k);
  };
  for (const double k : {1024.0, 4096.0}) {
    const double a100_balance = 312e12 * 0.72 / kA100Memory, h100_balance = 989e12 * 0.72 / (3350e9 * 0.80);
    const double busy_a100 = 4096 / (38 * 108.0), busy_h100 = 4096 / (32 * 132.0);  // SMs busy over the waves
    EXPECT_NEAR(share_lost(a100(), k), 1 / (1 + k / (busy_a100 * a100_balance)), 1e-12) << k;
    EXPECT_NEAR(share_lost(h100, k), 1 / (1 + k / (busy_h100 * h100_balance)), 1e-12) << k;
    EXPECT_GT(share_lost(h100, k), 1.65 * share_lost(a100(), k)) << k;
  }
}

TEST(MatmulSeconds, WithoutGpuFiguresEveryShapeRunsAtTheMatmulEfficiency) {
  ClusterSpec c = a100();
  c.hbm_gbps = 0, c.sm_count = 0;
  EXPECT_NEAR(matmul_seconds(c, 3, 5, 7), 2 * 3 * 5 * 7 / kA100Products, 1e-24);
}

TEST(Collectives, RingInANodeAndTreeForSmallTensorsAcrossMany) {
  const ClusterSpec c = a100();
  const double base = 8.4e-6, nvlink = 3.4e-6, network = 9.6e-6;
  // 256 MB over the 8 GPUs of a node: a ring, 14 steps on NVLink at 300 GB/s x 0.8.
  const double bytes = 256e6;
  EXPECT_NEAR(all_reduce_seconds(c, bytes, 8, 1), base + 14 * nvlink + 2 * bytes * 7 / 8 / 240e9, 1e-12);
  EXPECT_NEAR(all_gather_seconds(c, bytes, 8, 1), base + 7 * nvlink + bytes * 7 / 8 / 240e9, 1e-12);
  // 1 KB over 1024 ranks in 128 nodes: a tree, 2 log2(1024) = 20 steps, twice the bytes at 25 GB/s x 0.8.
  EXPECT_NEAR(all_reduce_seconds(c, 1e3, 1024, 1), base + 20 * network + 2 * 1e3 / 20e9, 1e-12);
  EXPECT_EQ(all_reduce_seconds(c, bytes, 1, 1), 0);
}

TEST(LayerTime, TensorParallelTrafficHidesBehindTheProductsOnlyAsFarAsAsked) {
  ClusterSpec c = a100();
  const ModelSpec model = model_spec("gpt3-175b");
  Layout l;
  l.tp = 8, l.pp = 8, l.dp = 1;
  const LayerTime exposed = layer_time(model, c, l, false);
  EXPECT_GT(exposed.tp, 0);
  EXPECT_EQ(exposed.tp_hidden, 0);
  c.tp_overlap = 0.5;
  EXPECT_DOUBLE_EQ(layer_time(model, c, l, false).tp_hidden, 0.5 * exposed.tp);
  c.tp_overlap = 1;
  const LayerTime all = layer_time(model, c, l, false);
  EXPECT_DOUBLE_EQ(all.tp_hidden, std::min(all.tp, all.weight));  // at most the products' time
}

// FlashAttention's scores and values, 4 b (heads / t) s^2 d FLOPs forward (Dao's count), run at the GPU's attention
// efficiency: FlashAttention-2's 35% on the H100 preset (Shah et al. 2024), where the products run at 72%.
TEST(LayerTime, FlashAttentionRunsAtItsOwnShareOfPeak) {
  ClusterSpec c = cluster_spec("h100-sxmx64");
  EXPECT_EQ(c.attention_efficiency, 0.35);
  EXPECT_EQ(a100().attention_efficiency, 0.72);
  const ModelSpec model = model_spec("gpt3-175b");  // 96 heads of 128, 2048 tokens
  Layout l;
  l.tp = 8, l.pp = 8, l.dp = 1, l.micro_batch_size = 1;
  const double at35 = layer_time(model, c, l, false).forward;
  c.attention_efficiency = 0.70;
  const double at70 = layer_time(model, c, l, false).forward;
  const double flops = 4.0 * 1 * (96 / 8) * 2048.0 * 2048.0 * 128;
  EXPECT_NEAR(at35 - at70, flops / 989e12 * (1 / 0.35 - 1 / 0.70), 1e-12);
}

// Without sequence parallelism the norms and dropouts run on every tensor rank whole: a tensor-parallel layer is
// slower without it, by the memory-bound work 1/t of which sequence parallelism leaves.
TEST(LayerTime, SequenceParallelismSplitsTheNormsAndDropouts) {
  const ClusterSpec c = a100();
  const ModelSpec model = model_spec("gpt3-175b");
  Layout l;
  l.tp = 8, l.pp = 8, l.dp = 1;
  const double split = layer_time(model, c, l, false).forward;
  l.sequence_parallel = false;
  const double whole = layer_time(model, c, l, false).forward;
  // Two norms (2 passes) and two bias-dropout-adds (3.5 passes) over 2048 x 12288 16-bit values, 7/8 of it saved.
  const double norm_bytes = (2 * 2 + 2 * 3.5) * 2.0 * 2048 * 12288;
  EXPECT_NEAR(whole - split, norm_bytes * 7 / 8 / kA100Memory, 1e-12);
}

}  // namespace
}  // namespace dualpipe::layout
