#include "dualpipe/run/train_options.h"

#include <algorithm>
#include <cstdio>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/schedule_file.h"

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
  if (config.schedule_file.empty()) return;
  const Schedule schedule = read_schedule_file(config.schedule_file);
  config.ranks = schedule.num_ranks;
  config.microbatches = schedule.num_microbatches;
}

std::string value_text(const TrainOption& option, const TrainConfig& config) {
  return std::visit(
      [&](auto member) -> std::string {
        using T = std::decay_t<decltype(config.*member)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return config.*member;
        } else if constexpr (std::is_same_v<T, double>) {
          char text[32];
          std::snprintf(text, sizeof text, "%.17g", config.*member);
          return text;
        } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          return std::to_string(config.*member);
        } else {
          return {};  // bools and lists are not single values
        }
      },
      option.field);
}

std::vector<std::string> command_arguments(const TrainConfig& config, bool every_option,
                                           const std::vector<TrainField>& always) {
  static const TrainConfig defaults;
  std::vector<std::string> args;
  for (const TrainOption& option : train_options()) {
    const bool same = std::visit([&](auto member) { return config.*member == defaults.*member; }, option.field);
    if (!every_option && same && std::find(always.begin(), always.end(), option.field) == always.end()) continue;
    const std::string name = primary_name(option);
    if (const auto* flag = std::get_if<bool TrainConfig::*>(&option.field)) {
      // A switch is given either way; a flag only when set.
      const std::string negated = negated_name(option);
      if (config.**flag) args.push_back(name);
      else if (!negated.empty()) args.push_back(negated);
    } else if (const auto* list = std::get_if<std::vector<std::string> TrainConfig::*>(&option.field)) {
      for (const std::string& item : config.**list) {
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
  using C = TrainConfig;
  static const std::vector<TrainOption> table = {
      // Pipeline
      {"-s,--kind,--schedule", schedule_help(), "Pipeline", &C::schedule},
      {"-r,--ranks,--pp", "Pipeline ranks P, one process each", "Pipeline", &C::ranks},
      {"--dp", "Data-parallel replicas D of the pipeline, each on its own slice of the batch: P x D processes",
       "Pipeline", &C::dp},
      {"--dp-overlap,!--no-dp-overlap",
       "Reduce each stage's gradients over the replicas while the step goes on, from its last W (default); "
       "--no-dp-overlap reduces them after the step",
       "Pipeline", &C::dp_overlap, false},
      {"--zero",
       "ZeRO stage: 0 none; 1 the optimizer state sharded over the data-parallel replicas (--zero1 is the old "
       "spelling); 2 the "
       "gradients too, each reduced to the one replica that updates it (reduce instead of all-reduce, after the "
       "step); 3 the parameters too, each kept whole by that replica alone and gathered by the others for the stage's "
       "actions of a step (prefetched one action ahead), dropped after its last. Needs --dp above 1",
       "Pipeline", &C::zero},
      {"--ep",
       "Expert-parallel group size E: the experts of each MoE layer are sharded over E data-parallel replicas of a "
       "stage (E divides --dp, --experts divisible by E)",
       "Pipeline", &C::ep},
      {"--tp",
       "Tensor-parallel ranks T of every stage (Megatron's: attention split by heads, the MLP by columns then rows, "
       "the embedding, head and cross entropy by vocabulary; T divides --heads and the vocabulary): P x D x T "
       "processes, the T of a stage consecutive",
       "Pipeline", &C::tp},
      {"--sp",
       "Sequence parallelism beside --tp: LayerNorms, residuals and the tensors between stages sharded along the "
       "sequence (all-gather and reduce-scatter replace the all-reduces; --seq-len divisible by T)",
       "Pipeline", &C::sp, false},
      {"--cp",
       "Context-parallel ranks C of every stage: each sequence cut into 2C chunks, rank c holding chunks c and "
       "2C-1-c (zig-zag, an equal share of causal attention), attention a ring passing K/V blocks (--seq-len "
       "divisible by 2C): P x D x C x T processes",
       "Pipeline", &C::cp},
      {"--fb-overlap,!--no-fb-overlap",
       "In DualPipe's overlapped forward-backward actions of an MoE model, run the backward on a second thread so "
       "one micro-batch's all-to-alls proceed while the other computes (default); --no-fb-overlap runs the "
       "forward, then the backward",
       "Pipeline", &C::fb_overlap, false},
      {"--fb-overlap-mode",
       "How the halves of an overlapped pair share a rank: phases (default), interleaved phase by phase on one "
       "thread in DeepSeek's order, each all-to-all under way while the other half computes and waited for where "
       "its result is first used; threads, the backward on a second thread, both computing at once; turns, two "
       "threads taking turns at each all-to-all (CPU stages; CUDA stages run it as threads)",
       "Pipeline", &C::fb_overlap_mode, false},
      {"-m,--microbatches", "Micro-batches per step (the schedule's rules apply)", "Pipeline", &C::microbatches},
      {"-v,--stages-per-rank", "Stages per rank for interleaved-1f1b (0: default)", "Pipeline", &C::stages_per_rank,
       false},
      {"--schedule-file",
       "Run the schedule in FILE (text form, or PyTorch's CSV for *.csv; e.g. from dualpipe plan -f text) instead "
       "of --schedule; --ranks and --microbatches follow from it",
       "Pipeline", &C::schedule_file, false},
      {"--recompute",
       "Activation recomputation: keep only each stage's input after its forward, run the forward again in the "
       "backward (same losses, less memory, one more forward)",
       "Pipeline", &C::recompute, false},
      {"--device",
       "Where the stages run: cpu, or cuda (GPU LOCAL_RANK modulo the GPUs here: over gloo, ranks may share one)",
       "Pipeline", &C::device},
      {"--backend",
       "Transport between ranks: gloo or nccl (default: nccl for --device cuda, gloo for cpu; nccl needs cuda)",
       "Pipeline", &C::backend, false},
      {"--emulate-device",
       "Emulate a device: each stage's MoE layers take the times of the simulator's costs COSTS, in milliseconds "
       "(F, B, W and a2a, e.g. F=20,B=40,W=20,a2a=20), by sleeping, so the host stays idle as with a GPU; the "
       "maths and losses are unchanged. Needs --experts",
       "Pipeline", &C::emulate_device, false},
      {"--emulate-link-rate",
       "With --emulate-device's a2a: the network's rate per rank (like 100mbit), which sizes each exchange so that "
       "it takes a2a's time",
       "Pipeline", &C::emulate_link_rate, false},
      {"--emulate-slow-rank",
       "With --emulate-device: RANK=FACTOR[@STEP] makes pipeline rank RANK's emulated compute FACTOR times as slow "
       "from step STEP (default 1), a straggler on purpose (e.g. 2=1.5@5)",
       "Stragglers", &C::emulate_slow_rank, false},
      {"--straggler-threshold",
       "Name a rank whose compute per layer takes at least this many times the median of the ranks running the same "
       "kind of action (F, B, I, W, F&B)",
       "Stragglers", &C::straggler_threshold},
      {"--straggler-steps", "... for this many steps in a row (one slow step is noise)", "Stragglers",
       &C::straggler_steps},
      {"--on-straggler",
       "report: print the measured speeds, the re-planned cut and schedule with their predicted step times, and the "
       "command that applies them; replan: apply them (checkpoint at the next step, restart the ranks with the new "
       "cut, continue) when predicted to gain at least 5%; needs --checkpoint-dir",
       "Stragglers", &C::on_straggler},
      {"--rank-speed",
       "The speed per pipeline rank the cut was made for, like 1,1,0.67,1 (what a re-plan passes on): the "
       "straggler watch takes it as normal (default: every rank at 1)",
       "Stragglers", &C::rank_speed, false},
      // Model
      {"--layers", "Transformer blocks in the whole model", "Model", &C::layers},
      {"--hidden", "Width of the residual stream", "Model", &C::hidden},
      {"--heads", "Attention heads (must divide --hidden)", "Model", &C::heads},
      {"--experts", "Experts per MoE layer: every block's MLP becomes a mixture of experts (0: dense MLPs)", "Model",
       &C::experts},
      {"--top-k", "Experts each token is routed to (at most --experts)", "Model", &C::top_k},
      {"--capacity-factor",
       "Token slots per expert, as a multiple of an even share (tokens x top-k / experts); choices beyond it are "
       "dropped and counted",
       "Model", &C::capacity_factor},
      {"--aux-loss", "Coefficient of the load-balancing loss of each MoE layer", "Model", &C::aux_loss},
      {"--seq-len", "Tokens (bytes) per training sequence, the model's context", "Model", &C::seq_len},
      {"--layers-per-stage", "Uneven cut of the layers into the schedule's stages, e.g. 3,4,4,3 (default: balanced)",
       "Model", &C::layers_per_stage, false},
      // Data
      {"--data",
       "Text files (or directories of them) to train on (default: Debian's fortunes, installed by "
       "scripts/setup.sh)",
       "Data", &C::data, false},
      {"-b,--batch", "Sequences per micro-batch", "Data", &C::batch},
      // Optimization
      {"--steps", "Training steps", "Optimization", &C::steps},
      {"--lr", "Peak learning rate of AdamW", "Optimization", &C::lr},
      {"--min-lr", "Learning rate at the last step (cosine decay)", "Optimization", &C::min_lr},
      {"--warmup", "Linear warm-up steps", "Optimization", &C::warmup},
      {"--weight-decay", "AdamW weight decay (matrices and embeddings)", "Optimization", &C::weight_decay},
      {"--beta1", "AdamW's decay of the first moment", "Optimization", &C::beta1},
      {"--beta2", "AdamW's decay of the second moment", "Optimization", &C::beta2},
      {"--clip", "Clip the global gradient norm to this (0: off)", "Optimization", &C::clip},
      {"--seed", "Seed of the weights, the data order and the sample", "Optimization", &C::seed},
      // Evaluation
      {"--eval-every", "Validation loss every N steps (also before the first and after the last; 0: only those)",
       "Evaluation", &C::eval_every},
      {"--prompt", "Start of the sample generated at the end", "Evaluation", &C::prompt},
      {"--sample-tokens", "Bytes to generate after the prompt (0: no sample)", "Evaluation", &C::sample_tokens},
      {"--temperature", "Sampling temperature (0: greedy)", "Evaluation", &C::temperature},
      // Checkpoints
      {"--checkpoint-dir", "Directory of sharded checkpoints (DIR/step-N/)", "Checkpoints", &C::checkpoint_dir,
       false},
      {"--save-every", "Save every N steps (0: after the last step only)", "Checkpoints", &C::save_every},
      {"--keep", "Keep the newest K checkpoints (0: all)", "Checkpoints", &C::keep},
      {"--resume", "Continue from the newest complete checkpoint in --checkpoint-dir", "Checkpoints", &C::resume,
       false},
      // Output
      {"--metrics", "Write JSON lines of the config, every step and every evaluation here", "Output", &C::metrics,
       false},
      {"--trace", "Where rank 0 writes the merged Chrome trace (empty: none)", "Output", &C::trace},
      {"--kineto-trace",
       "A new directory where each rank writes its PyTorch profiler trace of --kineto-steps steps from step 2 "
       "(rank<N>.pt.trace.json), for dualpipe profile --kineto and plan --from-kineto (empty: none)",
       "Output", &C::kineto_trace, false},
      {"--kineto-steps", "Steps the --kineto-trace profiles (each step of a small model adds megabytes)", "Output",
       &C::kineto_steps},
      {"--act-bytes",
       "Bytes of one stage's activations for one micro-batch (simulate's act_bytes): prints the planned peak in "
       "bytes beside the measured one",
       "Output", &C::act_bytes, false},
      {"--timeout", "Seconds a rank waits for a peer (rendezvous, messages) before failing with its name", "Output",
       &C::timeout_seconds},
      {"--stall-report-after",
       "Seconds without progress inside a step after which the ranks print one report of who waits on whom: 1 "
       "to half of --timeout (the default is cut to it), or 0: only on SIGUSR1 to a rank or to the launcher",
       "Output", &C::stall_report_after},
      {"--stall-report-dir",
       "Directory where each rank writes its state (stall-rank<N>.json) and rank 0 the report (stall-report.json) "
       "when the pipeline stalls (empty: the console only)",
       "Output", &C::stall_report_dir, false},
  };
  return table;
}

}  // namespace dualpipe::run
