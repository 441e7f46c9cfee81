// A model as the layout planner sees it: the sizes that fix its parameters, FLOPs and activations. Read from a
// JSON file or named by a preset (docs/layout.md lists both and the sources of the presets' figures).
#pragma once

#include <string>
#include <vector>

namespace dualpipe::layout {

// The largest models the planner takes: as `dualpipe train --layers` (models/gpt.cpp), and 2^16 experts.
constexpr int kMaxModelLayers = 100000;
constexpr int kMaxModelExperts = 1 << 16;

struct ModelSpec {
  std::string name;
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;        // grouped-query attention; 0: as many as heads
  int ffn_hidden = 0;      // the dense feed-forward width
  int vocab = 0;
  int seq_len = 0;
  bool gated_ffn = false;  // SwiGLU and kin: three feed-forward matrices instead of two
  // Mixture of experts (experts = 0: dense). Layers [0, dense_layers) stay dense; after them every
  // moe_layer_freq-th layer is an MoE layer.
  int experts = 0;
  int top_k = 0;
  int expert_ffn_hidden = 0;
  int shared_experts = 0;
  int dense_layers = 0;
  int moe_layer_freq = 1;
  // Node-limited routing (DeepSeek-V3): a token's experts span at most this many nodes, so its copies cross the
  // network once per node and fan out over NVLink there. 0: no limit.
  int max_nodes_per_token = 0;
  int dtype_bytes = 2;
  bool tied_embeddings = false;

  bool is_moe_layer(int layer) const;
  int moe_layer_count() const;
  int moe_layers_in(int begin, int end) const;  // of layers [begin, end)
  // Parameters of one layer's attention (q, k, v, o and the two norms), of a dense layer's feed-forward block,
  // of one expert, and of an MoE layer's router.
  double attention_parameters() const;
  double dense_ffn_parameters() const;
  double expert_parameters() const;
  double router_parameters() const;
  double embedding_parameters() const;  // input embedding, plus the output layer unless tied
  double total_parameters() const;
  // Parameters one token passes through: the dense ones, and top_k routed plus the shared experts of MoE layers.
  double active_parameters() const;
  // Throws InvalidArgument naming the field and the rule: every field within its range (docs/layout.md), heads
  // dividing hidden, kv_heads dividing heads, MoE fields consistent.
  void check() const;
};

// Parses a model's JSON object (fields as in docs/layout.md; unknown fields are refused, naming them).
ModelSpec parse_model_spec(const std::string& json_text, const std::string& source);
// A preset's name ("llama3-8b"), or a path to a JSON file.
ModelSpec model_spec(const std::string& preset_or_path);
std::vector<std::string> model_preset_names();

}  // namespace dualpipe::layout
