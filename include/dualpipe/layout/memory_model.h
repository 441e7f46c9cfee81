// The layout planner's memory model (docs/layout.md gives every formula and its source).
//  - Model states: mixed-precision Adam keeps 2 bytes of 16-bit parameters, 2 of 16-bit gradients and 12 of fp32
//    optimizer state (master weights, momentum, variance) per parameter, the ZeRO paper's 2Φ + 2Φ + 12Φ. ZeRO-1
//    shards the optimizer state over the data-parallel ranks, ZeRO-2 the gradients too, ZeRO-3 the parameters too.
//  - Activations of one transformer layer for one micro-batch: Korthikanti et al. 2022, "Reducing Activation
//    Recomputation in Large Transformer Models", section 4 and Table 2.
#pragma once

#include "dualpipe/layout/model_spec.h"
#include "dualpipe/schedule/zero_stage.h"

namespace dualpipe::layout {

struct ModelStateBytes {
  double parameters = 0, gradients = 0, optimizer = 0;
  double total() const { return parameters + gradients + optimizer; }
};

// The bytes per GPU of `params` parameters replicated on `shards` data-parallel ranks under ZeRO stage `zero`.
ModelStateBytes model_state_bytes(double params, ZeroStage zero, int shards);

enum class Recompute {
  None,       // every activation kept
  Selective,  // the attention core (scores, softmax, dropout) recomputed: Korthikanti's selective recomputation
  Full,       // only each layer's input kept; the backward re-runs the layer's forward
};
const char* recompute_name(Recompute recompute);
Recompute parse_recompute(const std::string& text);  // none, selective, full

// Korthikanti et al.'s Table 2, in bytes (16-bit activations): one standard transformer layer (hidden h, a heads,
// feed-forward 4h, GeLU, dropout) for micro-batch b and sequence s, tensor-parallel over t ranks, with or without
// sequence parallelism.
double korthikanti_layer_activation_bytes(double s, double b, double h, double a, int t, bool sequence_parallel,
                                          Recompute recompute);

struct LayerShape {
  int micro_batch = 1;
  int tp = 1;
  int cp = 1;                     // context parallelism divides the sequence
  bool sequence_parallel = true;  // with tp > 1
  Recompute recompute = Recompute::Selective;
  bool flash_attention = false;  // the scores are never kept (as under selective recomputation)
};

// The same accounting for one layer of `model` (dense or MoE): Korthikanti's terms with grouped-query K and V,
// a gated feed-forward's three products, and an MoE layer's top_k + shared experts and its dispatched copies of
// the input. Equals korthikanti_layer_activation_bytes for a standard GPT layer.
double layer_activation_bytes(const ModelSpec& model, bool moe_layer, const LayerShape& shape);

}  // namespace dualpipe::layout
