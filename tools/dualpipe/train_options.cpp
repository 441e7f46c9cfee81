#include "train_options.h"

#include <cstdio>

#include "dualpipe/generators.h"

namespace dualpipe::cli {
namespace {

std::string exact(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

}  // namespace

void add_train_options(CLI::App& sub, train::TrainConfig& o) {
  // The last of a repeated option wins, so a script can override its defaults by appending.
  sub.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::string kinds;
  for (const GeneratorInfo& g : generators()) kinds += (kinds.empty() ? "" : ", ") + std::string(g.name);
  sub.add_option("-s,--schedule", o.schedule, "Schedule kind: " + kinds)->capture_default_str()->group("Pipeline");
  sub.add_option("-r,--ranks,--pp", o.ranks, "Pipeline ranks P, one process each")->capture_default_str()->group("Pipeline");
  sub.add_option("--dp", o.dp, "Data-parallel replicas D of the pipeline, each on its own slice of the batch: P x D "
                 "processes")->capture_default_str()->group("Pipeline");
  sub.add_flag("--dp-overlap,!--no-dp-overlap", o.dp_overlap,
               "Reduce each stage's gradients over the replicas while the step goes on, from its last W (default); "
               "--no-dp-overlap reduces them after the step")->group("Pipeline");
  sub.add_flag("--zero1", o.zero1,
               "ZeRO-1: shard the optimizer state over the data-parallel replicas (needs --dp above 1); each "
               "replica updates its share of the parameters and sends it to the others. Same results, less memory")
      ->group("Pipeline");
  sub.add_option("--ep", o.ep, "Expert-parallel group size E: the experts of each MoE layer are sharded over E "
                 "data-parallel replicas of a stage (E divides --dp, --experts divisible by E)")
      ->capture_default_str()->group("Pipeline");
  sub.add_flag("--fb-overlap,!--no-fb-overlap", o.fb_overlap,
               "In DualPipe's overlapped forward-backward actions of an MoE model, run the backward on a second "
               "thread so one micro-batch's all-to-alls proceed while the other computes (default); "
               "--no-fb-overlap runs the forward, then the backward")->group("Pipeline");
  sub.add_flag("--fb-overlap-threads", o.fb_overlap_threads,
               "Let the two halves of an overlapped pair compute at once, sharing the cores, instead of taking turns "
               "at each all-to-all (the default: one half computes while the other's exchange runs)")
      ->group("Pipeline");
  sub.add_option("-m,--microbatches", o.microbatches, "Micro-batches per step (the schedule's rules apply)")
      ->capture_default_str()->group("Pipeline");
  sub.add_option("-v,--stages-per-rank", o.stages_per_rank, "Stages per rank for interleaved-1f1b (0: default)")
      ->group("Pipeline");
  sub.add_option("--schedule-file", o.schedule_file,
                 "Run the schedule in FILE (text form, or PyTorch's CSV for *.csv; e.g. from dualpipe plan -f text) "
                 "instead of --schedule; --ranks and --microbatches follow from it")
      ->group("Pipeline");
  sub.add_flag("--recompute", o.recompute,
               "Activation recomputation: keep only each stage's input after its forward, run the forward again "
               "in the backward (same losses, less memory, one more forward)")
      ->group("Pipeline");

  sub.add_option("--device", o.device, "Where the stages run: cpu, or cuda (GPU LOCAL_RANK modulo the GPUs here: over gloo, ranks may share one)")
      ->capture_default_str()->group("Pipeline");
  sub.add_option("--backend", o.backend, "Transport between ranks: gloo or nccl (default: nccl for --device cuda, "
                 "gloo for cpu; nccl needs cuda)")->group("Pipeline");

  sub.add_option("--layers", o.layers, "Transformer blocks in the whole model")->capture_default_str()->group("Model");
  sub.add_option("--hidden", o.hidden, "Width of the residual stream")->capture_default_str()->group("Model");
  sub.add_option("--heads", o.heads, "Attention heads (must divide --hidden)")->capture_default_str()->group("Model");
  sub.add_option("--experts", o.experts, "Experts per MoE layer: every block's MLP becomes a mixture of experts "
                 "(0: dense MLPs)")->capture_default_str()->group("Model");
  sub.add_option("--top-k", o.top_k, "Experts each token is routed to (at most --experts)")
      ->capture_default_str()->group("Model");
  sub.add_option("--capacity-factor", o.capacity_factor, "Token slots per expert, as a multiple of an even share "
                 "(tokens x top-k / experts); choices beyond it are dropped and counted")
      ->capture_default_str()->group("Model");
  sub.add_option("--aux-loss", o.aux_loss, "Coefficient of the load-balancing loss of each MoE layer")
      ->capture_default_str()->group("Model");
  sub.add_option("--seq-len", o.seq_len, "Tokens (bytes) per training sequence, the model's context")
      ->capture_default_str()->group("Model");
  sub.add_option("--layers-per-stage", o.layers_per_stage,
                 "Uneven cut of the layers into the schedule's stages, e.g. 3,4,4,3 (default: balanced)")
      ->group("Model");

  sub.add_option("--data", o.data, "Text files (or directories of them) to train on (default: Debian's fortunes, "
                                   "installed by scripts/setup.sh)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)->group("Data");
  sub.add_option("-b,--batch", o.batch, "Sequences per micro-batch")->capture_default_str()->group("Data");

  sub.add_option("-n,--steps", o.steps, "Training steps")->capture_default_str()->group("Optimization");
  sub.add_option("--lr", o.lr, "Peak learning rate of AdamW")->capture_default_str()->group("Optimization");
  sub.add_option("--min-lr", o.min_lr, "Learning rate at the last step (cosine decay)")->capture_default_str()
      ->group("Optimization");
  sub.add_option("--warmup", o.warmup, "Linear warm-up steps")->capture_default_str()->group("Optimization");
  sub.add_option("--weight-decay", o.weight_decay, "AdamW weight decay (matrices and embeddings)")
      ->capture_default_str()->group("Optimization");
  sub.add_option("--clip", o.clip, "Clip the global gradient norm to this (0: off)")->capture_default_str()
      ->group("Optimization");
  sub.add_option("--seed", o.seed, "Seed of the weights, the data order and the sample")->capture_default_str()
      ->group("Optimization");

  sub.add_option("--eval-every", o.eval_every, "Validation loss every N steps (also before the first and after "
                                               "the last; 0: only those)")
      ->capture_default_str()->group("Evaluation");
  sub.add_option("--prompt", o.prompt, "Start of the sample generated at the end")->capture_default_str()
      ->group("Evaluation");
  sub.add_option("--sample-tokens", o.sample_tokens, "Bytes to generate after the prompt (0: no sample)")
      ->capture_default_str()->group("Evaluation");
  sub.add_option("--temperature", o.temperature, "Sampling temperature (0: greedy)")->capture_default_str()
      ->group("Evaluation");

  sub.add_option("--checkpoint-dir", o.checkpoint_dir, "Directory of sharded checkpoints (DIR/step-N/)")
      ->group("Checkpoints");
  sub.add_option("--save-every", o.save_every, "Save every N steps (0: after the last step only)")
      ->capture_default_str()->group("Checkpoints");
  sub.add_option("--keep", o.keep, "Keep the newest K checkpoints (0: all)")->capture_default_str()
      ->group("Checkpoints");
  sub.add_flag("--resume", o.resume, "Continue from the newest complete checkpoint in --checkpoint-dir")
      ->group("Checkpoints");

  sub.add_option("--metrics", o.metrics, "Write JSON lines of the config, every step and every evaluation here")
      ->group("Output");
  sub.add_option("--trace", o.trace, "Where rank 0 writes the merged Chrome trace (empty: none)")
      ->capture_default_str()->group("Output");
  sub.add_option("--act-bytes", o.act_bytes,
                 "Bytes of one stage's activations for one micro-batch (simulate's act_bytes): prints the planned "
                 "peak in bytes beside the measured one")
      ->group("Output");
  sub.add_option("--timeout", o.timeout_seconds,
                 "Seconds a rank waits for a peer (rendezvous, messages) before failing with its name")
      ->capture_default_str()->group("Output");
}

std::vector<std::string> train_arguments(const train::TrainConfig& o) {
  std::vector<std::string> args = {
      "--schedule", o.schedule, "--ranks", std::to_string(o.ranks), "--dp", std::to_string(o.dp),
      "--ep", std::to_string(o.ep), "--microbatches", std::to_string(o.microbatches),
      "--stages-per-rank", std::to_string(o.stages_per_rank), "--schedule-file", o.schedule_file,
      "--layers", std::to_string(o.layers), "--hidden", std::to_string(o.hidden), "--heads", std::to_string(o.heads),
      "--experts", std::to_string(o.experts), "--top-k", std::to_string(o.top_k),
      "--capacity-factor", exact(o.capacity_factor), "--aux-loss", exact(o.aux_loss), "--seq-len", std::to_string(o.seq_len), "--layers-per-stage", o.layers_per_stage,
      "--batch", std::to_string(o.batch), "--steps", std::to_string(o.steps), "--lr", exact(o.lr),
      "--min-lr", exact(o.min_lr), "--warmup", std::to_string(o.warmup), "--weight-decay", exact(o.weight_decay),
      "--clip", exact(o.clip), "--seed", std::to_string(o.seed), "--eval-every", std::to_string(o.eval_every),
      "--prompt", o.prompt, "--sample-tokens", std::to_string(o.sample_tokens),
      "--temperature", exact(o.temperature), "--checkpoint-dir", o.checkpoint_dir,
      "--save-every", std::to_string(o.save_every), "--keep", std::to_string(o.keep), "--metrics", o.metrics,
      "--trace", o.trace, "--act-bytes", exact(o.act_bytes), "--timeout", exact(o.timeout_seconds),
      "--device", o.device, "--backend", o.backend};
  for (const std::string& file : o.data) {
    args.push_back("--data");
    args.push_back(file);
  }
  if (o.resume) args.push_back("--resume");
  if (o.recompute) args.push_back("--recompute");
  if (!o.dp_overlap) args.push_back("--no-dp-overlap");
  if (o.zero1) args.push_back("--zero1");
  if (!o.fb_overlap) args.push_back("--no-fb-overlap");
  if (o.fb_overlap_threads) args.push_back("--fb-overlap-threads");
  return args;
}

}  // namespace dualpipe::cli
