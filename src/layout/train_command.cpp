#include "dualpipe/layout/train_command.h"

#include <string>
#include <vector>

#include "dualpipe/run/train_options.h"
#include "dualpipe/run/train_rules.h"
#include "dualpipe/util/error.h"
#include "dualpipe/util/shell_words.h"

namespace dualpipe::layout {
namespace {

run::ModelFeatures features_of(const ModelSpec& m) {
  run::ModelFeatures f;
  f.vocab = m.vocab;
  f.hidden = m.hidden, f.ffn_hidden = m.ffn_hidden, f.heads = m.heads, f.kv_heads = m.kv_heads;
  f.gated_ffn = m.gated_ffn, f.tied_embeddings = m.tied_embeddings;
  f.experts = m.experts, f.expert_ffn_hidden = m.expert_ffn_hidden, f.shared_experts = m.shared_experts;
  f.dense_layers = m.dense_layers, f.moe_layer_freq = m.moe_layer_freq;
  return f;
}

// The trainer's options for the layout; "" or why the options cannot say it.
std::string options_for(const ModelSpec& model, const LayoutResult& row, run::TrainConfig& c) {
  const Layout& l = row.layout;
  // What the command line has no words for: these layouts are the planner's, not the trainer's.
  if (l.recompute == Recompute::Selective) return "selective recomputation has no train option (only whole stages)";
  c.ranks = l.pp, c.dp = l.dp, c.tp = l.tp, c.cp = l.cp, c.ep = l.ep;
  c.zero = l.dp > 1 ? l.zero : 0;  // over one replica ZeRO shards nothing
  c.sp = l.tp > 1;  // the planner's memory model assumes sequence parallelism with tensor parallelism
  c.recompute = l.recompute == Recompute::Full;
  // A one-rank pipeline runs each micro-batch's forward then its backward: the order 1F1B names for one rank.
  c.schedule = l.pp == 1 ? "1f1b" : l.schedule;
  c.stages_per_rank = l.schedule == "interleaved-1f1b" ? l.vpp : 0;
  c.microbatches = l.microbatches, c.batch = l.micro_batch_size;
  c.layers = model.layers, c.hidden = model.hidden, c.heads = model.heads, c.seq_len = model.seq_len;
  c.experts = model.experts;
  if (model.experts > 0) c.top_k = model.top_k;
  return "";
}

}  // namespace

TrainCommand train_command(const ModelSpec& model, const ClusterSpec& cluster, const LayoutResult& row) {
  TrainCommand out;
  if (cluster.gpus > cluster.gpus_per_node) {  // the command starts this machine's ranks only
    out.why_not = "the cluster has more than one node";
    return out;
  }
  out.why_not = run::unsupported_model(features_of(model));
  run::TrainConfig c;
  if (out.why_not.empty()) out.why_not = options_for(model, row, c);
  // A planned schedule runs from the file `dualpipe plan` writes, which sets the ranks and micro-batches.
  const bool planned = !row.plan_command.empty();
  try {
    if (out.why_not.empty()) run::check_options(c);
    if (out.why_not.empty() && !planned) run::schedule_of(c);
  } catch (const InvalidArgument& e) {
    out.why_not = e.what();
  }
  if (!out.why_not.empty()) return out;
  // Shown even where they equal the defaults, so that the command reads as the layout.
  using C = run::TrainConfig;
  std::vector<run::TrainField> shown = {&C::ranks, &C::schedule, &C::microbatches, &C::batch,
                                        &C::layers, &C::hidden,   &C::heads,        &C::seq_len};
  if (planned) {  // the file says the schedule, its ranks and micro-batches
    const C defaults;
    c.schedule = defaults.schedule, c.ranks = defaults.ranks, c.microbatches = defaults.microbatches;
    c.schedule_file = "plan.txt";
    shown = {&C::schedule_file, &C::batch, &C::layers, &C::hidden, &C::heads, &C::seq_len};
  }
  if (c.experts > 0) shown.push_back(&C::top_k);
  std::vector<std::string> words = {"dualpipe", "train"};
  for (std::string& argument : run::command_arguments(c, /*every_option=*/false, shown))
    words.push_back(std::move(argument));
  out.command = (planned ? row.plan_command + " && " : "") + shell_command(words);
  return out;
}

}  // namespace dualpipe::layout
