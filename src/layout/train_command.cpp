#include "dualpipe/layout/train_command.h"

#include <string>
#include <vector>

#include "dualpipe/run/train_options.h"
#include "dualpipe/run/train_rules.h"
#include "dualpipe/schedule/generators.h"
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
  static_cast<parallel::ParallelDims&>(c.parallel) = l;  // the same sizes, under the same rules
  c.parallel.zero = l.dp > 1 ? zero_stage(l.zero, "zero") : ZeroStage::None;  // over one replica it shards nothing
  c.parallel.sp = l.tp > 1;  // the planner's memory model assumes sequence parallelism with tensor parallelism
  c.pipeline.recompute = l.recompute == Recompute::Full;
  // A one-rank pipeline runs each micro-batch's forward then its backward: the order 1F1B names for one rank.
  c.pipeline.schedule = l.pp == 1 ? "1f1b" : l.schedule;
  const GeneratorInfo* generator = find_generator(l.schedule);
  c.pipeline.stages_per_rank = generator && generator->stages_per_rank == 0 ? l.vpp : 0;  // the looped kinds' v
  c.pipeline.microbatches = l.microbatches, c.data.batch = l.micro_batch_size;
  c.model.layers = model.layers, c.model.hidden = model.hidden, c.model.heads = model.heads;
  c.model.seq_len = model.seq_len;
  c.model.experts = model.experts;
  if (model.experts > 0) c.model.top_k = model.top_k;
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
#define F DUALPIPE_TRAIN_FIELD
  std::vector<run::TrainField> shown = {F(parallel.pp), F(pipeline.schedule), F(pipeline.microbatches),
                                        F(data.batch),  F(model.layers),      F(model.hidden),
                                        F(model.heads), F(model.seq_len)};
  if (planned) {  // the file says the schedule, its ranks and micro-batches
    const run::TrainConfig defaults;
    c.pipeline.schedule = defaults.pipeline.schedule, c.parallel.pp = defaults.parallel.pp;
    c.pipeline.microbatches = defaults.pipeline.microbatches;
    c.pipeline.schedule_file = "plan.txt";
    shown = {F(pipeline.schedule_file), F(data.batch), F(model.layers), F(model.hidden), F(model.heads),
             F(model.seq_len)};
  }
  if (c.model.experts > 0) shown.push_back(F(model.top_k));
#undef F
  std::vector<std::string> words = {"dualpipe", "train"};
  for (std::string& argument : run::command_arguments(c, /*every_option=*/false, shown))
    words.push_back(std::move(argument));
  out.command = (planned ? row.plan_command + " && " : "") + shell_command(words);
  return out;
}

}  // namespace dualpipe::layout
