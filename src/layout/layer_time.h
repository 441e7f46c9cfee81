// One transformer layer's time for one micro-batch on one GPU, op by op (docs/layout.md, "The time model"):
//  - matrix products at the cluster's matmul efficiency, less where their shape fills the GPU's tiles and waves
//    only in part, no faster than their inputs stream from HBM (a roofline), then their output's write;
//  - norms, residual adds, dropouts, activations and (without FlashAttention) attention's softmax and dropout on
//    the scores: memory-bound, their bytes at the HBM bandwidth times the memory efficiency;
//  - the tensor- and context-parallel collectives, from collectives.h.
#pragma once

#include "dualpipe/layout/layout.h"

namespace dualpipe::layout {

struct LayerTime {
  // Compute seconds: the forward; the backward (input and weight gradients: each matrix product twice, the
  // memory-bound ops twice); of it the weight gradients (W); what recomputation adds to the backward.
  double forward = 0, backward = 0, weight = 0, recompute = 0;
  double forward_flops = 0;    // matrix products and attention core, forward
  double recompute_flops = 0;  // what the recomputed forward adds
  // Tensor-parallel collectives of the forward (the backward has as many; a full recomputation runs them again)
  // and the share of them that runs behind the matrix products (cluster.tp_overlap, at most their time).
  double tp = 0, tp_hidden = 0;
  // Context parallelism's ring exchange of K and V, forward; the backward exchanges twice as much. Hidden behind
  // the attention core up to its time.
  double cp = 0, cp_hidden = 0;
};

LayerTime layer_time(const ModelSpec& model, const ClusterSpec& cluster, const Layout& layout, bool moe);

// The output layer and the loss of one micro-batch on the last stage.
LayerTime output_layer_time(const ModelSpec& model, const ClusterSpec& cluster, const Layout& layout);

// A matrix product of (m x k) by (k x n), `batch` times, in seconds.
double matmul_seconds(const ClusterSpec& cluster, double m, double n, double k, double batch = 1);

}  // namespace dualpipe::layout
