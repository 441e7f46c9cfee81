#include "dualpipe/layout/model_spec.h"

#include <algorithm>
#include <map>

#include "dualpipe/util/error.h"
#include "dualpipe/util/printable.h"
#include "layout/spec_json.h"

namespace dualpipe::layout {

namespace {

// The published configurations (docs/layout.md gives each source).
ModelSpec preset(const std::string& name) {
  ModelSpec m;
  m.name = name;
  if (name == "gpt3-175b") {  // Brown et al. 2020, Table 2.1; Megatron's padded vocabulary
    m.layers = 96, m.hidden = 12288, m.heads = 96, m.ffn_hidden = 4 * 12288, m.vocab = 51200, m.seq_len = 2048;
    m.tied_embeddings = true;
  } else if (name == "llama3-8b" || name == "llama3-70b" || name == "llama3-405b") {  // Llama 3 paper, Table 3
    m.kv_heads = 8, m.vocab = 128256, m.seq_len = 8192, m.gated_ffn = true;
    if (name == "llama3-8b") m.layers = 32, m.hidden = 4096, m.heads = 32, m.ffn_hidden = 14336;
    if (name == "llama3-70b") m.layers = 80, m.hidden = 8192, m.heads = 64, m.ffn_hidden = 28672;
    if (name == "llama3-405b") m.layers = 126, m.hidden = 16384, m.heads = 128, m.ffn_hidden = 53248;
  } else if (name == "deepseek-v3") {  // DeepSeek-V3 technical report, section 4.2; MLA counted as full attention
    m.layers = 61, m.hidden = 7168, m.heads = 128, m.ffn_hidden = 18432, m.vocab = 129280, m.seq_len = 4096;
    m.gated_ffn = true, m.experts = 256, m.top_k = 8, m.expert_ffn_hidden = 2048, m.shared_experts = 1;
    m.dense_layers = 3, m.max_nodes_per_token = 4;  // section 2.1.2 and 4.2: at most 4 nodes per token
  } else {
    m.layers = 0;
  }
  return m;
}

}  // namespace

std::vector<std::string> model_preset_names() {
  return {"gpt3-175b", "llama3-8b", "llama3-70b", "llama3-405b", "deepseek-v3"};
}

bool ModelSpec::is_moe_layer(int layer) const {
  return experts > 0 && layer >= dense_layers && (layer - dense_layers) % moe_layer_freq == 0;
}

int ModelSpec::moe_layers_in(int begin, int end) const {
  // The MoE layers are dense_layers + k x moe_layer_freq: counted, not looped (a model may have 100000 layers).
  if (experts <= 0 || moe_layer_freq < 1) return 0;
  begin = std::max(begin, dense_layers);
  if (begin >= end) return 0;
  const long long first = (begin - dense_layers + moe_layer_freq - 1) / moe_layer_freq;  // the first k at or after
  const long long last = (end - 1 - dense_layers) / moe_layer_freq;                        // the last k before end
  return int(std::max(0LL, last - first + 1));
}

int ModelSpec::moe_layer_count() const { return moe_layers_in(0, layers); }

double ModelSpec::attention_parameters() const {
  const double h = hidden, kv_width = h * (kv_heads > 0 ? kv_heads : heads) / heads;
  return 2 * h * h + 2 * h * kv_width + 2 * h;  // q and o, k and v, two norms
}

double ModelSpec::dense_ffn_parameters() const { return (gated_ffn ? 3.0 : 2.0) * hidden * double(ffn_hidden); }
double ModelSpec::expert_parameters() const { return (gated_ffn ? 3.0 : 2.0) * hidden * double(expert_ffn_hidden); }
double ModelSpec::router_parameters() const { return double(hidden) * experts; }

double ModelSpec::embedding_parameters() const {
  return (tied_embeddings ? 1.0 : 2.0) * double(vocab) * hidden;
}

double ModelSpec::total_parameters() const {
  const int moe = moe_layer_count();
  return layers * attention_parameters() + (layers - moe) * dense_ffn_parameters() +
         moe * ((experts + shared_experts) * expert_parameters() + router_parameters()) + embedding_parameters();
}

double ModelSpec::active_parameters() const {
  const int moe = moe_layer_count();
  return layers * attention_parameters() + (layers - moe) * dense_ffn_parameters() +
         moe * ((top_k + shared_experts) * expert_parameters() + router_parameters()) + embedding_parameters();
}

void ModelSpec::check() const {
  // Every field within a documented range (docs/layout.md, "Model files"): beyond it a number would drive the
  // search's time or overflow the sums, and no model comes near it (DeepSeek-V3: 61 layers, 256 experts).
  const auto within = [&](const char* field, long long value, long long low, long long high, const char* note = "") {
    DUALPIPE_REQUIRE(value >= low && value <= high, "model '", printable_line(name), "': ", field, "=", value,
                     " must be between ", low, " and ", high, note);
  };
  within("layers", layers, 1, kMaxModelLayers);
  within("hidden", hidden, 1, 1 << 18);
  within("heads", heads, 1, hidden, " (hidden)");
  DUALPIPE_REQUIRE(hidden % heads == 0, "model '", printable_line(name), "': heads=", heads, " must divide hidden=",
                   hidden);
  within("kv_heads", kv_heads, 0, heads, " (heads; 0: as many as heads)");
  DUALPIPE_REQUIRE(kv_heads == 0 || heads % kv_heads == 0, "model '", printable_line(name), "': kv_heads=", kv_heads,
                   " must divide heads=", heads);
  within("ffn_hidden", ffn_hidden, 1, 1 << 20);
  within("vocab", vocab, 1, 1 << 24);
  within("seq_len", seq_len, 1, 1 << 24);
  DUALPIPE_REQUIRE(dtype_bytes == 1 || dtype_bytes == 2 || dtype_bytes == 4 || dtype_bytes == 8, "model '",
                   printable_line(name), "': dtype_bytes=", dtype_bytes, " must be 1, 2, 4 or 8");
  within("experts", experts, 0, kMaxModelExperts, " (0: dense)");
  if (experts == 0) return;
  within("top_k", top_k, 1, experts, " (experts)");
  within("expert_ffn_hidden", expert_ffn_hidden, 1, 1 << 20);
  within("shared_experts", shared_experts, 0, 1024);
  within("dense_layers", dense_layers, 0, layers - 1, " (layers - 1: at least one MoE layer)");
  within("moe_layer_freq", moe_layer_freq, 1, layers);
  within("max_nodes_per_token", max_nodes_per_token, 0, 1 << 20, " (0: no limit)");
}

ModelSpec parse_model_spec(const std::string& json_text, const std::string& source) {
  ModelSpec m;
  m.name = source;
  SpecObject object(json_text, source);
  object.read("name", m.name);
  object.read("layers", m.layers), object.read("hidden", m.hidden), object.read("heads", m.heads);
  object.read("kv_heads", m.kv_heads), object.read("ffn_hidden", m.ffn_hidden), object.read("vocab", m.vocab);
  object.read("seq_len", m.seq_len), object.read("gated_ffn", m.gated_ffn), object.read("experts", m.experts);
  object.read("top_k", m.top_k), object.read("expert_ffn_hidden", m.expert_ffn_hidden);
  object.read("shared_experts", m.shared_experts), object.read("dense_layers", m.dense_layers);
  object.read("moe_layer_freq", m.moe_layer_freq), object.read("dtype_bytes", m.dtype_bytes);
  object.read("tied_embeddings", m.tied_embeddings), object.read("max_nodes_per_token", m.max_nodes_per_token);
  object.refuse_unknown();
  object.require({"layers", "hidden", "heads", "ffn_hidden", "vocab", "seq_len"});
  m.check();
  return m;
}

ModelSpec model_spec(const std::string& preset_or_path) {
  ModelSpec m = preset(preset_or_path);
  if (m.layers > 0) return m;
  return parse_model_spec(read_spec_file(preset_or_path, "--model"), preset_or_path);
}

}  // namespace dualpipe::layout
