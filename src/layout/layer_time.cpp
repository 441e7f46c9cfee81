#include "layout/layer_time.h"

#include <algorithm>
#include <cmath>

#include "layout/collectives.h"

namespace dualpipe::layout {

namespace {

// cuBLAS and CUTLASS compute a product in output tiles of about this many rows and columns, one tile per SM at a
// time: a dimension that is not a multiple of it pads the last tile, and a tile count just above a multiple of the
// SMs leaves most of the last wave idle.
constexpr double kTile = 128;

// Fused element-wise kernels of a layer (Megatron-LM's), in passes over a tensor of the hidden size per token:
// each layer norm reads and writes it (2), each bias-dropout-add reads the input and the residual and writes the
// sum and a one-byte mask (3.5); two of each per layer.
constexpr double kNormResidualPasses = 2 * 2 + 2 * 3.5;
// Without FlashAttention, the scaled, masked softmax reads and writes the scores (2) and the dropout reads them
// and writes them with a one-byte mask (2.5).
constexpr double kScorePasses = 2 + 2.5;
// The feed-forward activation: GeLU with its bias reads and writes the intermediate (2), SwiGLU reads two and
// writes one (3).
constexpr double kGeluPasses = 2, kSwigluPasses = 3;
// An MoE layer permutes its tokens' copies into expert order and back (a read and a write each).
constexpr double kPermutePasses = 4;
// The loss reads and writes the fp32 logits twice (the vocabulary-parallel softmax and its gradient): 16 bytes.
constexpr double kLossBytesPerLogit = 16;
// The memory-bound kernels read and write about twice as much backward (each matrix product appears twice there,
// at its own shapes: add_product); FlashAttention's backward does 5 products of the forward's 2.
constexpr double kBackwardMemoryFactor = 2, kFlashBackwardFactor = 2.5;

double memory_seconds(const ClusterSpec& cluster, double bytes) {
  if (cluster.hbm_gbps <= 0) return 0;
  return bytes / (cluster.hbm_gbps * 1e9 * cluster.memory_efficiency);
}

double tile_fill(double n) { return n / (std::ceil(n / kTile) * kTile); }

// What one forward's parts cost before the backward and recomputation are derived from them.
struct Parts {
  double weight_products = 0;  // products with a weight, forward
  // Their backward, each product at its own shape: the input gradient (the output's gradient times the weight,
  // inner dimension n) and the weight gradient (W in the backward; inner dimension the tokens).
  double input_grads = 0, weight_grads = 0;
  double attention = 0;        // attention core: products, and without FlashAttention the softmax and dropout
  double memory_bound = 0;     // the rest of the element-wise work
  double flops = 0, attention_flops = 0;
};

// A product of m rows (tokens) by a k x n weight.
void add_product(Parts& p, const ClusterSpec& cluster, double m, double n, double k, double batch = 1) {
  p.weight_products += matmul_seconds(cluster, m, n, k, batch);
  p.input_grads += matmul_seconds(cluster, m, k, n, batch);
  p.weight_grads += matmul_seconds(cluster, k, n, m, batch);
  p.flops += 2 * m * n * k * batch;
}

}  // namespace

double matmul_seconds(const ClusterSpec& cluster, double m, double n, double k, double batch) {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return 0;
  double efficiency = cluster.matmul_efficiency;
  if (cluster.sm_count > 0) {
    const double tiles = std::ceil(m / kTile) * std::ceil(n / kTile) * batch;
    const double waves = std::ceil(tiles / cluster.sm_count);
    efficiency *= tile_fill(m) * tile_fill(n) * tiles / (waves * cluster.sm_count);
  }
  const double main_loop = 2 * m * n * k * batch / (cluster.peak_tflops * 1e12 * efficiency);
  const double inputs = 2.0 * (m * k + k * n) * batch, output = 2.0 * m * n * batch;  // 16-bit
  // The main loop streams the inputs (a roofline: no faster than they come from HBM); each tile writes its output
  // when its loop ends, every SM of a wave at once and one tile per SM at a time, so the output's write follows
  // the main loop instead of hiding behind it. Against the main loop it weighs as the GPU's balance over k (peak
  // FLOP/s over HBM bytes/s: 153 on an A100, 295 on an H100), which makes a product's share of peak follow the
  // hardware (docs/layout.md, "The time model").
  return std::max(main_loop, memory_seconds(cluster, inputs)) + memory_seconds(cluster, output);
}

LayerTime layer_time(const ModelSpec& model, const ClusterSpec& cluster, const Layout& l, bool moe) {
  const double t = l.tp, b = l.micro_batch_size, h = model.hidden, bytes = model.dtype_bytes;
  const double queries = double(model.seq_len) / l.cp, keys = model.seq_len;
  const double tokens = b * queries;  // this rank's tokens, before tensor parallelism
  const double head_dim = h / model.heads, heads = model.heads / t;
  const double kv_heads = std::max(1.0, double(model.kv_heads > 0 ? model.kv_heads : model.heads) / t);
  // Norms, dropouts and residuals run on a 1/t share of the tokens with sequence parallelism, on all of them else.
  const double norm_tokens = l.sequence_parallel ? tokens / t : tokens;

  Parts p;
  add_product(p, cluster, tokens, (heads + 2 * kv_heads) * head_dim, h);  // Q, K, V
  add_product(p, cluster, tokens, h, heads * head_dim);                   // output projection
  // Scores (QK^T) and values (AV) of every head: FlashAttention runs them as one kernel at the products' rate;
  // without it they are two batched products and the softmax and dropout stream the scores through memory.
  p.attention_flops = 4 * b * heads * queries * keys * head_dim;
  if (l.flash_attention) {
    p.attention = p.attention_flops / (cluster.peak_tflops * 1e12 * cluster.attention_efficiency);
  } else {
    p.attention = matmul_seconds(cluster, queries, keys, head_dim, b * heads) +
                  matmul_seconds(cluster, queries, head_dim, keys, b * heads) +
                  memory_seconds(cluster, kScorePasses * bytes * b * heads * queries * keys);
  }
  p.flops += p.attention_flops;
  p.memory_bound += memory_seconds(cluster, kNormResidualPasses * bytes * norm_tokens * h);
  const double activation_passes = model.gated_ffn ? kSwigluPasses : kGeluPasses;
  const double up = model.gated_ffn ? 2 : 1;  // a gated feed-forward's first product makes two intermediates
  const auto feed_forward = [&](double rows, double width, double groups = 1) {
    add_product(p, cluster, rows, up * width, h, groups);
    add_product(p, cluster, rows, h, width, groups);
    p.memory_bound += memory_seconds(cluster, activation_passes * bytes * rows * width * groups);
  };
  if (!moe) {
    feed_forward(tokens, model.ffn_hidden / t);
  } else {
    // Each tensor rank routes its share of the tokens; over the expert group every rank receives as many
    // copies as it sends, top_k per token, spread over its experts / ep experts.
    const double copies = tokens / t * model.top_k, local_experts = double(model.experts) / l.ep;
    add_product(p, cluster, tokens / t, model.experts, h);  // router
    feed_forward(copies / local_experts, model.expert_ffn_hidden, local_experts);
    if (model.shared_experts > 0) feed_forward(tokens, double(model.shared_experts) * model.expert_ffn_hidden / t);
    p.memory_bound += memory_seconds(cluster, kPermutePasses * bytes * copies * h);
  }

  LayerTime out;
  out.forward = p.weight_products + p.attention + p.memory_bound;
  const double attention_backward = l.flash_attention ? kFlashBackwardFactor * p.attention : 2 * p.attention;
  out.weight = p.weight_grads;
  out.backward = p.input_grads + p.weight_grads + attention_backward + kBackwardMemoryFactor * p.memory_bound;
  out.forward_flops = p.flops;

  // Tensor parallelism: with sequence parallelism two all-gathers and two reduce-scatters of the layer's
  // activation, else two all-reduces.
  const double activation = tokens * h * bytes;
  if (t > 1) {
    out.tp = l.sequence_parallel ? 2 * all_gather_seconds(cluster, activation, l.tp, 1) +
                                       2 * reduce_scatter_seconds(cluster, activation, l.tp, 1)
                                 : 2 * all_reduce_seconds(cluster, activation, l.tp, 1);
    out.tp_hidden = std::min(cluster.tp_overlap * out.tp, p.weight_products);
  }
  // Context parallelism: a ring of cp - 1 exchanges of this rank's K and V.
  if (l.cp > 1) {
    const GroupLink link = group_link(cluster, l.cp, l.tp);
    const double kv = 2 * tokens * kv_heads * head_dim * bytes;
    out.cp = (l.cp - 1) * (link.step_seconds + kv / link.bytes_per_second);
    out.cp_hidden = std::min(out.cp, p.attention);
  }
  if (l.recompute == Recompute::Full) {
    out.recompute = out.forward, out.recompute_flops = p.flops;
  } else if (l.recompute == Recompute::Selective && !l.flash_attention) {
    out.recompute = p.attention, out.recompute_flops = p.attention_flops;
  }
  return out;
}

LayerTime output_layer_time(const ModelSpec& model, const ClusterSpec& cluster, const Layout& l) {
  const double tokens = double(l.micro_batch_size) * model.seq_len / l.cp, vocab = double(model.vocab) / l.tp;
  LayerTime out;
  const double loss = memory_seconds(cluster, kLossBytesPerLogit / 2 * tokens * vocab);
  out.forward = matmul_seconds(cluster, tokens, vocab, model.hidden) + loss;
  out.weight = matmul_seconds(cluster, model.hidden, vocab, tokens);
  out.backward = matmul_seconds(cluster, tokens, model.hidden, vocab) + out.weight + loss;
  out.forward_flops = 2 * tokens * vocab * model.hidden;
  return out;
}

}  // namespace dualpipe::layout
