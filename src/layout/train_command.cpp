#include "dualpipe/layout/train_command.h"

#include <string>

namespace dualpipe::layout {

namespace {

// Why the trainer's model cannot be this one, or "".
std::string model_mismatch(const ModelSpec& m) {
  if (m.vocab != 256) return "the trainer's model reads bytes (vocab 256), this one has vocab " + std::to_string(m.vocab);
  if (m.gated_ffn || m.ffn_hidden != 4 * m.hidden) return "the trainer's MLP is 4 x hidden with GELU";
  if (m.kv_heads != 0 && m.kv_heads != m.heads) return "the trainer has no grouped-query attention";
  if (m.tied_embeddings) return "the trainer does not tie its embeddings";
  if (m.experts > 0 && (m.expert_ffn_hidden != 4 * m.hidden || m.shared_experts > 0 || m.dense_layers > 0 ||
                        m.moe_layer_freq != 1))
    return "the trainer's MoE layers are all layers, experts of 4 x hidden, none shared";
  return "";
}

// Why the trainer cannot split this model over l.tp ranks as the planner does (with sequence parallelism), or "".
std::string tensor_parallel_mismatch(const ModelSpec& m, const Layout& l) {
  if (l.tp == 1) return "";
  const std::string tp = std::to_string(l.tp);
  if (m.experts > 0 && l.ep > 1 && l.recompute == Recompute::Full)
    return "the trainer recomputes beside tensor and expert parallelism only without the forward-backward overlap";
  if (m.heads % l.tp != 0)
    return "the trainer splits attention by heads: tp " + tp + " must divide " + std::to_string(m.heads) + " heads";
  if (m.seq_len % l.tp != 0) return "sequence parallelism needs the sequence divisible by tp " + tp;
  if (256 % l.tp != 0) return "the trainer splits its vocabulary of 256 by tp, which " + tp + " does not divide";
  return "";
}

// Why the trainer cannot split this model's sequences over l.cp ranks as the planner does, or "".
std::string context_parallel_mismatch(const ModelSpec& m, const Layout& l) {
  if (l.cp == 1) return "";
  if (l.tp > 1) return "the trainer's context parallelism runs beside tensor parallelism without sequence parallelism, "
                       "which the planner assumes with tp";
  if (m.seq_len % (2 * l.cp) != 0)
    return "the trainer cuts each sequence into 2 x cp = " + std::to_string(2 * l.cp) + " chunks, which " +
           std::to_string(m.seq_len) + " tokens do not divide into";
  return "";
}

// Why the trainer cannot run this layout, or "".
std::string layout_mismatch(const ModelSpec& model, const ClusterSpec& cluster, const Layout& l) {
  if (cluster.gpus > cluster.gpus_per_node) return "the cluster has more than one node";
  if (const std::string tp = tensor_parallel_mismatch(model, l); !tp.empty()) return tp;
  if (const std::string cp = context_parallel_mismatch(model, l); !cp.empty()) return cp;
  if (l.recompute == Recompute::Selective) return "the trainer recomputes whole stages (full), not selectively";
  if (l.pp < 2) return "the trainer runs a pipeline of at least 2 ranks";
  return "";
}

}  // namespace

TrainCommand train_command(const ModelSpec& model, const ClusterSpec& cluster, const LayoutResult& row) {
  const Layout& l = row.layout;
  TrainCommand out;
  out.why_not = model_mismatch(model);
  if (out.why_not.empty()) out.why_not = layout_mismatch(model, cluster, l);
  if (!out.why_not.empty()) return out;
  // A planned schedule runs from the file `dualpipe plan` writes; it sets the ranks and micro-batches.
  const bool planned = !row.plan_command.empty();
  std::string c = planned ? row.plan_command + " && dualpipe train --schedule-file plan.txt"
                          : "dualpipe train --pp " + std::to_string(l.pp);
  if (l.dp > 1) c += " --dp " + std::to_string(l.dp);
  if (l.tp > 1) c += " --tp " + std::to_string(l.tp) + " --sp";  // the planner's memory model assumes SP with TP
  if (l.cp > 1) c += " --cp " + std::to_string(l.cp);
  if (l.ep > 1) c += " --ep " + std::to_string(l.ep);
  if (l.zero == 1 && l.dp > 1) c += " --zero1";
  if (l.zero > 1 && l.dp > 1) c += " --zero " + std::to_string(l.zero);
  if (l.recompute == Recompute::Full) c += " --recompute";
  if (!planned) {
    c += " --schedule " + l.schedule;
    if (l.schedule == "interleaved-1f1b") c += " --stages-per-rank " + std::to_string(l.vpp);
    c += " --microbatches " + std::to_string(l.microbatches);
  }
  c += " --batch " + std::to_string(l.micro_batch_size);
  c += " --layers " + std::to_string(model.layers) + " --hidden " + std::to_string(model.hidden) + " --heads " +
       std::to_string(model.heads) + " --seq-len " + std::to_string(model.seq_len);
  if (model.experts > 0) c += " --experts " + std::to_string(model.experts) + " --top-k " + std::to_string(model.top_k);
  out.command = c;
  return out;
}

}  // namespace dualpipe::layout
