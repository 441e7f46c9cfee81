#include "dualpipe/run/train_options.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "dualpipe/run/train_values.h"

#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/schedule_file.h"
#include "dualpipe/util/error.h"

namespace dualpipe::run {
namespace {

std::string schedule_help() {
  std::string kinds;
  for (const GeneratorInfo& g : generators()) kinds += (kinds.empty() ? "" : ", ") + std::string(g.name);
  return "Schedule kind, in any case (--schedule is the same option): " + kinds;
}

std::vector<std::string_view> split_names(std::string_view names) {
  std::vector<std::string_view> out;
  while (!names.empty()) {
    const std::size_t comma = names.find(',');
    out.push_back(names.substr(0, comma));
    names = comma == std::string_view::npos ? std::string_view() : names.substr(comma + 1);
  }
  return out;
}

}  // namespace

std::string primary_name(const TrainOption& option) {
  for (std::string_view name : split_names(option.names))
    if (name.substr(0, 2) == "--") return std::string(name);
  return {};
}

std::string record_key(const TrainOption& option) {
  std::string key = primary_name(option).substr(2);
  for (char& c : key)
    if (c == '-') c = '_';
  return key;
}

std::string negated_name(const TrainOption& option) {
  for (std::string_view name : split_names(option.names))
    if (name.substr(0, 1) == "!") return std::string(name.substr(1));
  return {};
}

void resolve_schedule_file(TrainConfig& config) {
  if (config.pipeline.schedule_file.empty()) return;
  const Schedule schedule = read_schedule_file(config.pipeline.schedule_file);
  config.parallel.pp = schedule.num_ranks;
  config.pipeline.microbatches = schedule.num_microbatches;
}

std::string value_text(const TrainOption& option, const TrainConfig& config) {
  return std::visit(
      [&](auto field) -> std::string {
        const auto& value = field.in(config);
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return value;
        } else if constexpr (std::is_same_v<T, double>) {
          char text[32];
          std::snprintf(text, sizeof text, "%.17g", value);
          return text;
        } else if constexpr (std::is_enum_v<T>) {
          return word_of(value);
        } else if constexpr (std::is_same_v<T, std::vector<int>>) {
          return format_layer_counts(value);
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          return speeds_text(value);
        } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          return std::to_string(value);
        } else {
          return {};  // bools and lists of files are not single values
        }
      },
      option.field);
}

void set_value_text(const TrainOption& option, TrainConfig& config, const std::string& text) {
  std::visit(
      [&](auto field) {
        auto& value = field.at(config);
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_enum_v<T>) {
          value = parse_word<T>(text);
        } else if constexpr (std::is_same_v<T, std::vector<int>>) {
          value = parse_layer_counts(text);
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          value = parse_speeds(text);
        } else {
          DUALPIPE_CHECK(false, primary_name(option), " is not parsed from text");
        }
      },
      option.field);
}

nlohmann::json record_value(const TrainOption& option, const TrainConfig& config) {
  return std::visit(
      [&](auto field) -> nlohmann::json {
        const auto& value = field.in(config);
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, ZeroStage>) return number_of(value);
        else if constexpr (kParsedFromText<T>) return value_text(option, config);
        else return value;
      },
      option.field);
}

bool same_field(const TrainField& a, const TrainField& b) {
  static TrainConfig probe;
  return std::visit(
      [](auto x, auto y) {
        if constexpr (std::is_same_v<decltype(x), decltype(y)>) return &x.at(probe) == &y.at(probe);
        else return false;
      },
      a, b);
}

std::vector<std::string> command_arguments(const TrainConfig& config, bool every_option,
                                           const std::vector<TrainField>& always) {
  static const TrainConfig defaults;
  std::vector<std::string> args;
  for (const TrainOption& option : train_options()) {
    const std::string name = primary_name(option);
    const bool same = std::visit([&](auto field) { return field.in(config) == field.in(defaults); }, option.field);
    const auto asked = [&](const TrainField& field) { return same_field(field, option.field); };
    if (!every_option && same && std::none_of(always.begin(), always.end(), asked)) continue;
    if (const auto* flag = std::get_if<Field<bool>>(&option.field)) {
      // A switch is given either way; a flag only when set.
      const std::string negated = negated_name(option);
      if (flag->in(config)) args.push_back(name);
      else if (!negated.empty()) args.push_back(negated);
    } else if (const auto* list = std::get_if<Field<std::vector<std::string>>>(&option.field)) {
      for (const std::string& item : list->in(config)) {
        args.push_back(name);
        args.push_back(item);
      }
    } else {
      args.push_back(name);
      args.push_back(value_text(option, config));
    }
  }
  return args;
}

const std::vector<TrainOption>& train_options() {
#define F DUALPIPE_TRAIN_FIELD
  static const std::vector<TrainOption> table = {
      // Pipeline
      {"-s,--kind,--schedule", schedule_help(), "Pipeline", F(pipeline.schedule)},
      {"-r,--ranks,--pp", "Pipeline ranks P, one process each", "Pipeline", F(parallel.pp)},
      {"--dp", "Data-parallel replicas D of the pipeline, each on its own slice of the batch: P x D processes",
       "Pipeline", F(parallel.dp)},
      {"--dp-overlap,!--no-dp-overlap",
       "Reduce each stage's gradients over the replicas while the step goes on, from its last W (default); "
       "--no-dp-overlap reduces them after the step",
       "Pipeline", F(parallel.dp_overlap), false},
      {"--zero",
       "ZeRO stage: 0 none; 1 the optimizer state sharded over the data-parallel replicas (--zero1 is the old "
       "spelling); 2 the "
       "gradients too, each reduced to the one replica that updates it (reduce instead of all-reduce, after the "
       "step); 3 the parameters too, each kept whole by that replica alone and gathered by the others for the stage's "
       "actions of a step (prefetched one action ahead), dropped after its last. Needs --dp above 1",
       "Pipeline", F(parallel.zero)},
      {"--ep",
       "Expert-parallel group size E: the experts of each MoE layer are sharded over E data-parallel replicas of a "
       "stage (E divides --dp, --experts divisible by E)",
       "Pipeline", F(parallel.ep)},
      {"--tp",
       "Tensor-parallel ranks T of every stage (Megatron's: attention split by heads, the MLP by columns then rows, "
       "the embedding, head and cross entropy by vocabulary; T divides --heads and the vocabulary): P x D x T "
       "processes, the T of a stage consecutive",
       "Pipeline", F(parallel.tp)},
      {"--sp",
       "Sequence parallelism beside --tp: LayerNorms, residuals and the tensors between stages sharded along the "
       "sequence (all-gather and reduce-scatter replace the all-reduces; --seq-len divisible by T)",
       "Pipeline", F(parallel.sp), false},
      {"--cp",
       "Context-parallel ranks C of every stage: each sequence cut into 2C chunks, rank c holding chunks c and "
       "2C-1-c (zig-zag, an equal share of causal attention), attention a ring passing K/V blocks (--seq-len "
       "divisible by 2C): P x D x C x T processes",
       "Pipeline", F(parallel.cp)},
      {"--fb-overlap,!--no-fb-overlap",
       "In DualPipe's overlapped forward-backward actions of an MoE model, run the backward on a second thread so "
       "one micro-batch's all-to-alls proceed while the other computes (default); --no-fb-overlap runs the "
       "forward, then the backward",
       "Pipeline", F(pipeline.fb_overlap), false},
      {"--fb-overlap-mode",
       "How the halves of an overlapped pair share a rank: phases (default), interleaved phase by phase on one "
       "thread in DeepSeek's order, each all-to-all under way while the other half computes and waited for where "
       "its result is first used; threads, the backward on a second thread, both computing at once; turns, two "
       "threads taking turns at each all-to-all (CPU stages; CUDA stages run it as threads)",
       "Pipeline", F(pipeline.fb_overlap_mode), false},
      {"-m,--microbatches", "Micro-batches per step (the schedule's rules apply)", "Pipeline", F(pipeline.microbatches)},
      {"-v,--stages-per-rank", "Stages per rank for interleaved-1f1b and combined-1f1b (0: default)", "Pipeline",
       F(pipeline.stages_per_rank), false},
      {"--schedule-file",
       "Run the schedule in FILE (text form, or PyTorch's CSV for *.csv; e.g. from dualpipe plan -f text) instead "
       "of --schedule; --ranks and --microbatches follow from it",
       "Pipeline", F(pipeline.schedule_file), false},
      {"--recompute",
       "Activation recomputation: keep only each stage's input after its forward, run the forward again in the "
       "backward (same losses, less memory, one more forward)",
       "Pipeline", F(pipeline.recompute), false},
      {"--device",
       "Where the stages run: cpu, or cuda (GPU LOCAL_RANK modulo the GPUs here: over gloo, ranks may share one)",
       "Pipeline", F(device.kind)},
      {"--backend",
       "Transport between ranks: gloo, nccl, or auto: nccl for --device cuda, gloo for cpu (nccl needs cuda)",
       "Pipeline", F(device.backend)},
      {"--emulate-device",
       "Emulate a device: each stage's MoE layers take the times of the simulator's costs COSTS, in milliseconds "
       "(F, B, W and a2a, e.g. F=20,B=40,W=20,a2a=20), by sleeping, so the host stays idle as with a GPU; the "
       "maths and losses are unchanged. Needs --experts",
       "Pipeline", F(device.emulate), false},
      {"--emulate-link-rate",
       "With --emulate-device's a2a: the network's rate per rank (like 100mbit), which sizes each exchange so that "
       "it takes a2a's time",
       "Pipeline", F(device.emulate_link_rate), false},
      {"--emulate-slow-rank",
       "With --emulate-device: RANK=FACTOR[@STEP] makes pipeline rank RANK's emulated compute FACTOR times as slow "
       "from step STEP (default 1), a straggler on purpose (e.g. 2=1.5@5)",
       "Stragglers", F(stragglers.emulate_slow_rank), false},
      {"--straggler-threshold",
       "Name a rank whose compute per layer takes at least this many times the median of the ranks running the same "
       "kind of action (F, B, I, W, F&B)",
       "Stragglers", F(stragglers.threshold)},
      {"--straggler-steps", "... for this many steps in a row (one slow step is noise)", "Stragglers",
       F(stragglers.steps)},
      {"--on-straggler",
       "report: print the measured speeds, the re-planned cut and schedule with their predicted step times, and the "
       "command that applies them; replan: apply them (checkpoint at the next step, restart the ranks with the new "
       "cut, continue) when predicted to gain at least 5%; needs --checkpoint-dir",
       "Stragglers", F(stragglers.action)},
      {"--rank-speed",
       "The speed per pipeline rank the cut was made for, like 1,1,0.67,1 (what a re-plan passes on): the "
       "straggler watch takes it as normal (default: every rank at 1)",
       "Stragglers", F(stragglers.rank_speed), false},
      // Model
      {"--layers", "Transformer blocks in the whole model", "Model", F(model.layers)},
      {"--hidden", "Width of the residual stream", "Model", F(model.hidden)},
      {"--heads", "Attention heads (must divide --hidden)", "Model", F(model.heads)},
      {"--experts", "Experts per MoE layer: every block's MLP becomes a mixture of experts (0: dense MLPs)", "Model",
       F(model.experts)},
      {"--top-k", "Experts each token is routed to (at most --experts)", "Model", F(model.top_k)},
      {"--capacity-factor",
       "Token slots per expert, as a multiple of an even share (tokens x top-k / experts); choices beyond it are "
       "dropped and counted",
       "Model", F(model.capacity_factor)},
      {"--aux-loss", "Coefficient of the load-balancing loss of each MoE layer", "Model", F(model.aux_loss)},
      {"--seq-len", "Tokens (bytes) per training sequence, the model's context", "Model", F(model.seq_len)},
      {"--layers-per-stage", "Uneven cut of the layers into the schedule's stages, e.g. 3,4,4,3 (default: balanced)",
       "Model", F(model.layers_per_stage), false},
      // Data
      {"--data",
       "Text files (or directories of them) to train on (default: Debian's fortunes, installed by "
       "scripts/setup.sh)",
       "Data", F(data.files), false},
      {"-b,--batch", "Sequences per micro-batch", "Data", F(data.batch)},
      // Optimization
      {"--steps", "Training steps", "Optimization", F(optimizer.steps)},
      {"--lr", "Peak learning rate of AdamW", "Optimization", F(optimizer.lr)},
      {"--min-lr", "Learning rate at the last step (cosine decay)", "Optimization", F(optimizer.min_lr)},
      {"--warmup", "Linear warm-up steps", "Optimization", F(optimizer.warmup)},
      {"--weight-decay", "AdamW weight decay (matrices and embeddings)", "Optimization", F(optimizer.weight_decay)},
      {"--beta1", "AdamW's decay of the first moment", "Optimization", F(optimizer.beta1)},
      {"--beta2", "AdamW's decay of the second moment", "Optimization", F(optimizer.beta2)},
      {"--clip", "Clip the global gradient norm to this (0: off)", "Optimization", F(optimizer.clip)},
      {"--seed", "Seed of the weights, the data order and the sample", "Optimization", F(data.seed)},
      // Evaluation
      {"--eval-every", "Validation loss every N steps (also before the first and after the last; 0: only those)",
       "Evaluation", F(outputs.eval_every)},
      {"--prompt", "Start of the sample generated at the end", "Evaluation", F(outputs.prompt)},
      {"--sample-tokens", "Bytes to generate after the prompt (0: no sample)", "Evaluation", F(outputs.sample_tokens)},
      {"--temperature", "Sampling temperature (0: greedy)", "Evaluation", F(outputs.temperature)},
      // Checkpoints
      {"--checkpoint-dir", "Directory of sharded checkpoints (DIR/step-N/)", "Checkpoints", F(checkpoint.dir),
       false},
      {"--save-every", "Save every N steps (0: after the last step only)", "Checkpoints", F(checkpoint.save_every)},
      {"--keep", "Keep the newest K checkpoints (0: all)", "Checkpoints", F(checkpoint.keep)},
      {"--resume", "Continue from the newest complete checkpoint in --checkpoint-dir", "Checkpoints", F(checkpoint.resume),
       false},
      // Output
      {"--metrics", "Write JSON lines of the config, every step and every evaluation here", "Output", F(outputs.metrics),
       false},
      {"--trace", "Where rank 0 writes the merged Chrome trace (empty: none)", "Output", F(outputs.trace)},
      {"--kineto-trace",
       "A new directory where each rank writes its PyTorch profiler trace of --kineto-steps steps from step 2 "
       "(rank<N>.pt.trace.json), for dualpipe profile --kineto and plan --from-kineto (empty: none)",
       "Output", F(outputs.kineto_trace), false},
      {"--kineto-steps", "Steps the --kineto-trace profiles (each step of a small model adds megabytes)", "Output",
       F(outputs.kineto_steps)},
      {"--act-bytes",
       "Bytes of one stage's activations for one micro-batch (simulate's act_bytes): prints the planned peak in "
       "bytes beside the measured one",
       "Output", F(outputs.act_bytes), false},
      {"--timeout", "Seconds a rank waits for a peer (rendezvous, messages) before failing with its name", "Output",
       F(device.timeout_seconds)},
      {"--stall-report-after",
       "Seconds without progress inside a step after which the ranks print one report of who waits on whom: 1 "
       "to half of --timeout (the default is cut to it), or 0: only on SIGUSR1 to a rank or to the launcher",
       "Output", F(device.stall_report_after)},
      {"--stall-report-dir",
       "Directory where each rank writes its state (stall-rank<N>.json) and rank 0 the report (stall-report.json) "
       "when the pipeline stalls (empty: the console only)",
       "Output", F(device.stall_report_dir), false},
  };
#undef F
  return table;
}

}  // namespace dualpipe::run
