#include "dualpipe/train/run_plan.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "dualpipe/data/byte_tokenizer.h"
#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/schedule_file.h"
#include "dualpipe/schedule/schedule_limits.h"
#include "dualpipe/schedule/validate.h"
#include "dualpipe/train/checkpoint.h"
#include "dualpipe/util/byte_size.h"
#include "dualpipe/util/error.h"
#include "dualpipe/util/output_paths.h"
#include "checkpoint_io.h"
#include "device_choice.h"
#include "device_emulation.h"
#include "kineto_profile.h"
#include "training_data.h"

namespace dualpipe::train {

namespace {

// The least a CPU run holds: one copy of the model's weights, gradients and AdamW moments (16 bytes a parameter,
// float32), and the same again for the step-1 single-process reference. Above this machine's memory it cannot
// run: refused here, with the sizes, rather than by an allocation failing inside a rank.
void check_fits_in_memory(const TrainConfig& c, const models::GptConfig& model) {
  if (c.device != "cpu") return;  // the stages live in GPU memory, which this machine cannot see
  const double parameters = static_cast<double>(model.parameter_count());
  const double needed = parameters * 16 * 2;
  const double physical = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  DUALPIPE_REQUIRE(physical <= 0 || needed <= physical, "the model has ", parameters / 1e6,
                   " million parameters: its weights, gradients and AdamW state (16 bytes a parameter) and the "
                   "step-1 reference's take at least ", describe_bytes(needed), ", above this machine's ",
                   describe_bytes(physical), " of memory: use a smaller --hidden, --layers or --experts");
}

}  // namespace

namespace {

// --cp's rules: every rank holds two equal chunks of each sequence, and the features it does not cover are refused.
void check_context_parallel(const TrainConfig& c) {
  DUALPIPE_REQUIRE(c.cp >= 1 && c.cp <= 64, "--cp must be between 1 and 64, got ", c.cp);
  if (c.cp == 1) return;
  DUALPIPE_REQUIRE(c.seq_len % (2 * c.cp) == 0, "--seq-len ", c.seq_len, " does not divide into 2 x --cp ", c.cp,
                   " = ", 2 * c.cp, " chunks: each context-parallel rank holds two equal chunks of every sequence");
  DUALPIPE_REQUIRE(!c.sp, "--cp with --sp is not supported yet: use --cp with --tp alone");
}

// --tp's rules: every tensor-parallel layer splits evenly, and the features it does not cover yet are refused.
void check_tensor_parallel(const TrainConfig& c) {
  DUALPIPE_REQUIRE(c.tp >= 1 && c.tp <= 64, "--tp must be between 1 and 64, got ", c.tp);
  DUALPIPE_REQUIRE(!c.sp || c.tp > 1, "--sp needs --tp above 1, got --tp ", c.tp,
                   ": sequence parallelism shards what tensor parallelism leaves whole");
  DUALPIPE_REQUIRE(!c.sp || c.seq_len % c.tp == 0, "--seq-len ", c.seq_len, " must be divisible by --tp ", c.tp,
                   " with --sp: each tensor-parallel rank holds an equal part of the sequence");
  if (c.tp == 1) return;
  DUALPIPE_REQUIRE(c.heads % c.tp == 0, "--tp ", c.tp, " must divide --heads ", c.heads,
                   ": attention is split by heads, the same number on every tensor-parallel rank");
  // --heads divides --hidden (GptConfig::check), so T divides the hidden size and the MLP's 4 x hidden too.
  DUALPIPE_REQUIRE(data::ByteTokenizer::kVocabSize % c.tp == 0, "--tp ", c.tp, " must divide the vocabulary of ",
                   data::ByteTokenizer::kVocabSize, " tokens: the embedding and the head are split by vocabulary");
  DUALPIPE_REQUIRE(!c.recompute || c.ep == 1 || !c.fb_overlap, "--recompute with --tp ", c.tp, " and --ep ", c.ep,
                   " needs --no-fb-overlap: the overlapped backward would run a forward's tensor-parallel collectives "
                   "beside the other half's");
}

}  // namespace

RunPlan make_run_plan(const TrainConfig& c) {
  DUALPIPE_REQUIRE(c.ranks >= 1 && c.ranks <= 64, "--ranks must be between 1 and 64 local processes, got ", c.ranks);
  DUALPIPE_REQUIRE(c.microbatches >= 1 && c.microbatches <= 4096, "--microbatches must be between 1 and 4096, got ",
                   c.microbatches);
  DUALPIPE_REQUIRE(c.batch >= 1 && c.batch <= 65536, "--batch (sequences per micro-batch) must be between 1 and "
                   "65536, got ", c.batch);
  DUALPIPE_REQUIRE(c.steps >= 1 && c.steps <= 10000000, "--steps must be between 1 and 10^7, got ", c.steps);
  DUALPIPE_REQUIRE(c.eval_every >= 0, "--eval-every must be 0 (only before and after) or more steps, got ",
                   c.eval_every);
  DUALPIPE_REQUIRE(std::isfinite(c.weight_decay) && c.weight_decay >= 0 && c.weight_decay < 1,
                   "--weight-decay must be in [0, 1), got ", c.weight_decay);
  DUALPIPE_REQUIRE(std::isfinite(c.clip) && c.clip >= 0, "--clip must be 0 (off) or a positive norm, got ", c.clip);
  DUALPIPE_REQUIRE(c.beta1 >= 0 && c.beta1 < 1 && c.beta2 >= 0 && c.beta2 < 1,
                   "AdamW betas must be in [0, 1), got ", c.beta1, " and ", c.beta2);
  DUALPIPE_REQUIRE(c.sample_tokens >= 0 && c.sample_tokens <= 100000, "--sample-tokens must be between 0 and "
                   "100000, got ", c.sample_tokens);
  DUALPIPE_REQUIRE(std::isfinite(c.temperature) && c.temperature >= 0 && c.temperature <= 100,
                   "--temperature must be between 0 (greedy) and 100, got ", c.temperature);
  DUALPIPE_REQUIRE(c.sample_tokens == 0 || !c.prompt.empty(), "--prompt must not be empty (or use --sample-tokens 0)");
  DUALPIPE_REQUIRE(std::isfinite(c.act_bytes) && c.act_bytes >= 0, "--act-bytes must be a number of bytes >= 0, got ",
                   c.act_bytes);
  DUALPIPE_REQUIRE(c.timeout_seconds > 0 && c.timeout_seconds <= 86400,
                   "--timeout must be above 0 and at most 86400 seconds, got ", c.timeout_seconds);
  DUALPIPE_REQUIRE(c.save_every >= 0 && c.keep >= 0, "--save-every and --keep must be 0 or more, got ", c.save_every,
                   " and ", c.keep);
  DUALPIPE_REQUIRE(c.dp >= 1 && c.dp <= 1024, "--dp must be between 1 and 1024, got ", c.dp);
  DUALPIPE_REQUIRE(c.zero >= 0 && c.zero <= 3, "--zero must be 0, 1, 2 or 3, got ", c.zero);
  DUALPIPE_REQUIRE(!c.zero1 || c.zero <= 1, "--zero1 and --zero ", c.zero,
                   " ask for two ZeRO stages: --zero1 is --zero 1, give one of them");
  DUALPIPE_REQUIRE(c.zero_stage() == 0 || c.dp > 1, c.zero1 ? std::string("--zero1") : "--zero " + std::to_string(c.zero),
                   " needs --dp above 1, got --dp ", c.dp, ": it shards over the data-parallel replicas");
  DUALPIPE_REQUIRE(!c.checkpoint_dir.empty() || (c.save_every == 0 && !c.resume && c.keep == 0),
                   "--save-every, --keep and --resume need --checkpoint-dir DIR");
  DUALPIPE_REQUIRE(c.ep >= 1 && c.dp % c.ep == 0, "--ep ", c.ep, " must divide --dp ", c.dp,
                   ": expert parallelism runs across the data-parallel replicas of a stage");
  DUALPIPE_REQUIRE(c.ep == 1 || c.experts > 0, "--ep ", c.ep, " needs an MoE model: give --experts N");
  check_tensor_parallel(c);
  check_context_parallel(c);
  DUALPIPE_REQUIRE(c.experts <= 0 || c.experts % c.ep == 0, "--experts ", c.experts, " must be divisible by --ep ",
                   c.ep, ": each rank of an expert-parallel group holds the same number of experts");

  RunPlan plan;
  if (c.schedule_file.empty()) {
    ScheduleOptions so;
    so.num_ranks = c.ranks;
    so.num_microbatches = c.microbatches;
    so.stages_per_rank = c.stages_per_rank;
    plan.schedule = make_schedule(c.schedule, so);
  } else {
    plan.schedule = read_schedule_file(c.schedule_file);
    validate(plan.schedule);
    DUALPIPE_REQUIRE(plan.schedule.num_ranks == c.ranks && plan.schedule.num_microbatches == c.microbatches,
                     "--schedule-file '", c.schedule_file, "' has ", plan.schedule.num_ranks, " ranks and ",
                     plan.schedule.num_microbatches, " micro-batches, but --ranks is ", c.ranks,
                     " and --microbatches ", c.microbatches);
  }
  const int stages = plan.schedule.num_stages;
  DUALPIPE_REQUIRE(c.layers >= stages, "--layers ", c.layers, " is fewer than the ", stages, " stages of ",
                   plan.schedule.kind, " on ", c.ranks, " ranks: every stage needs at least one layer");
  plan.cut = c.layers_per_stage.empty() ? models::StageCut::balanced(c.layers, stages)
                                        : models::StageCut::parse(c.layers_per_stage, c.layers, stages);
  plan.model.vocab = data::ByteTokenizer::kVocabSize;
  plan.model.seq_len = c.seq_len;
  plan.model.hidden = c.hidden;
  plan.model.heads = c.heads;
  plan.model.layers = c.layers;
  plan.model.seed = c.seed;
  plan.model.moe.experts = c.experts;
  plan.model.moe.top_k = c.top_k;
  plan.model.moe.capacity_factor = c.capacity_factor;
  DUALPIPE_REQUIRE(std::isfinite(c.aux_loss) && c.aux_loss >= 0 && c.aux_loss <= 100,
                   "--aux-loss must be between 0 and 100, got ", c.aux_loss);
  plan.model.moe.aux_loss_weight = c.aux_loss / c.microbatches;  // as each micro-batch's loss is weighted
  plan.model.emulated_stages = emulated_stages(c, plan.cut);
  plan.model.check();
  check_fits_in_memory(c, plan.model);
  plan.lr = {c.lr, c.min_lr, c.warmup, c.steps};
  plan.lr.check();
  return plan;
}

namespace {

// An output file is written at the end of a long run (the trace) or as it goes (the metrics): its folder must
// exist and be writable before the run starts, not when the work is done.
void check_output_path(const char* option, const std::string& path) {
  if (path.empty()) return;
  namespace fs = std::filesystem;
  const fs::path parent = fs::absolute(path).parent_path();
  std::error_code error;
  DUALPIPE_REQUIRE(fs::is_directory(parent, error), option, " '", path, "': the folder ", parent.string(),
                   " does not exist");
  DUALPIPE_REQUIRE(access(parent.c_str(), W_OK) == 0, option, " '", path, "': the folder ", parent.string(),
                   " is not writable");
  DUALPIPE_REQUIRE(!fs::is_directory(path, error), option, " '", path, "' is a directory, not a file");
}

}  // namespace

void check_fresh_start(const TrainConfig& c) {
  if (c.resume) return;
  const auto newest = newest_complete_checkpoint(c.checkpoint_dir, nullptr);
  DUALPIPE_REQUIRE(!newest, "--checkpoint-dir '", c.checkpoint_dir, "' holds the checkpoints of an earlier run (the "
                   "newest is ", newest.value_or(""), "): add --resume to continue it, or choose an empty directory");
}

void check_config(const TrainConfig& c) {
  const RunPlan plan = make_run_plan(c);
  choose_device(c);
  check_output_path("--trace", c.trace);
  check_output_path("--metrics", c.metrics);
  check_kineto_trace_dir(c.kineto_trace, c.steps, c.kineto_steps);
  TrainingData data = load_training_data(c);
  std::vector<NamedPath> inputs = {{"--schedule-file", c.schedule_file}, {"--checkpoint-dir", c.checkpoint_dir}};
  for (const std::string& file : data.corpus.files) inputs.push_back({"--data", file});
  check_outputs_apart(inputs, {{"--metrics", c.metrics}, {"--trace", c.trace}});
  if (c.checkpoint_dir.empty()) return;
  prepare_checkpoint_dir(c.checkpoint_dir);
  check_fresh_start(c);
  if (!c.resume) return;
  // The checkpoint --resume will load: refused here, once, if it does not fit or is damaged.
  if (const auto dir = newest_complete_checkpoint(c.checkpoint_dir, nullptr)) {
    const CheckpointManifest manifest = read_manifest(*dir);
    check_resumable(c, checkpoint_identity(c, plan, data.corpus), *dir, manifest);
    // Every shard holds parameters of the model, so check_checkpoint_loads reads (and verifies) each, once.
    check_shard_set(*dir, manifest);
    check_checkpoint_loads(plan, c.ep, *dir, manifest);
    data.reader.restore(manifest.data_position);
  }
}

void check_resumable(const TrainConfig& c, const CheckpointIdentity& identity, const std::string& dir,
                     const CheckpointManifest& manifest) {
  check_identity(dir, manifest.identity, identity);
  DUALPIPE_REQUIRE(c.steps > manifest.step, "--steps ", c.steps, " leaves nothing to train after checkpoint ", dir,
                   " (step ", manifest.step, "): give --steps above ", manifest.step);
}

CheckpointIdentity checkpoint_identity(const TrainConfig& c, const RunPlan& plan, const data::Corpus& corpus) {
  CheckpointIdentity id{plan.model.vocab, plan.model.seq_len, plan.model.hidden, plan.model.heads,
                        plan.model.layers, plan.cut.to_string(), c.ranks, plan.model.moe.experts, c.ep};
  id.seed = c.seed;
  id.microbatches = c.microbatches;
  id.batch = c.batch;
  id.data_parallel = c.dp;
  id.data_bytes = corpus.text.size();
  id.data_checksum = fnv1a64(corpus.text);
  return id;
}

}  // namespace dualpipe::train
