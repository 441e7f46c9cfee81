#include "dualpipe/layout/memory_model.h"

#include "dualpipe/parallel/zero_shares.h"
#include "dualpipe/util/error.h"

namespace dualpipe::layout {

ModelStateBytes model_state_bytes(double params, ZeroStage zero, int shards) {
  DUALPIPE_REQUIRE(shards >= 1, "data-parallel ranks must be >= 1, got ", shards);
  const parallel::ZeroShares kept = parallel::zero_shares(zero, shards);
  return {2 * params * kept.parameters, 2 * params * kept.gradients, 12 * params * kept.optimizer};
}

const char* recompute_name(Recompute recompute) {
  switch (recompute) {
    case Recompute::None: return "none";
    case Recompute::Selective: return "selective";
    case Recompute::Full: return "full";
  }
  return "?";
}

Recompute parse_recompute(const std::string& text) {
  if (text == "none") return Recompute::None;
  if (text == "selective") return Recompute::Selective;
  if (text == "full") return Recompute::Full;
  throw InvalidArgument("recompute '" + text + "' is not one of none, selective, full");
}

double korthikanti_layer_activation_bytes(double s, double b, double h, double a, int t, bool sequence_parallel,
                                          Recompute recompute) {
  const double sbh = s * b * h, scores = 5 * a * s / h;
  if (recompute == Recompute::Full) return sequence_parallel ? 2 * sbh / t : 2 * sbh;
  const double kept_scores = recompute == Recompute::Selective ? 0 : scores;
  if (sequence_parallel || t == 1) return sbh * (34 + kept_scores) / t;
  return sbh * (10 + 24.0 / t + kept_scores / t);
}

double layer_activation_bytes(const ModelSpec& model, bool moe_layer, const LayerShape& shape) {
  const double s = double(model.seq_len) / shape.cp, b = shape.micro_batch, h = model.hidden;
  const double sbh = s * b * h;
  const int t = shape.tp;
  const bool split_all = shape.sequence_parallel || t == 1;
  if (shape.recompute == Recompute::Full) return split_all ? 2 * sbh / t : 2 * sbh;
  // In units of sbh bytes. Korthikanti's 34 = 11 (attention) + 19 (MLP) + 4 (two layer norms). The parts that
  // tensor parallelism splits: Q, K, V and the output projection's input (8 for full attention); the MLP's
  // intermediate tensors (16 for a 4h GeLU MLP). The rest (the two block inputs, their dropout masks and the
  // layer norms: 2 + 1 + 2 + 1 + 4 = 10) is split only by sequence parallelism.
  const double kv_share = double(model.kv_heads > 0 ? model.kv_heads : model.heads) / model.heads;
  const double attention_split = 2 + 4 * kv_share + 2;
  double ffn_width = double(model.ffn_hidden) / h, dispatched_copies = 0;
  if (moe_layer) {
    ffn_width = double(model.top_k + model.shared_experts) * model.expert_ffn_hidden / h;
    dispatched_copies = 2.0 * model.top_k;
  }
  const double mlp_split = (model.gated_ffn ? 6 : 4) * ffn_width + dispatched_copies;
  const double unsplit = 10;
  const double scores =
      shape.recompute == Recompute::Selective || shape.flash_attention ? 0 : 5.0 * model.heads * model.seq_len / h;
  const double split = attention_split + mlp_split + scores;
  return split_all ? sbh * (unsplit + split) / t : sbh * (unsplit + split / t);
}

}  // namespace dualpipe::layout
