#include "dualpipe/run/train_rules.h"

#include <cmath>

#include "dualpipe/data/byte_tokenizer.h"
#include "dualpipe/run/straggler.h"
#include "dualpipe/run/train_values.h"
#include "dualpipe/schedule/data_parallel_lowering.h"
#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/schedule_file.h"
#include "dualpipe/schedule/validate.h"
#include "dualpipe/schedule/zero_stage.h"
#include "dualpipe/sim/cost_model.h"
#include "dualpipe/util/error.h"

namespace dualpipe::run {
namespace {

constexpr int kVocabulary = data::ByteTokenizer::kVocabSize;  // the trainer reads bytes

// The straggler options: each in its range, and what it needs.
void check_stragglers(const TrainConfig& c) {
  const StragglerConfig& s = c.stragglers;
  DUALPIPE_REQUIRE(std::isfinite(s.threshold) && s.threshold > 1 && s.threshold <= 100,
                   "--straggler-threshold must be above 1 and at most 100 (times the median), got ", s.threshold);
  DUALPIPE_REQUIRE(s.steps >= 1 && s.steps <= 100000, "--straggler-steps must be between 1 and 100000, got ",
                   s.steps);
  const bool replan = s.action == StragglerAction::Replan;
  DUALPIPE_REQUIRE(!replan || !c.checkpoint.dir.empty(), "--on-straggler replan needs --checkpoint-dir DIR: the "
                   "re-planned ranks continue from the checkpoint it saves there");
  DUALPIPE_REQUIRE(!replan || c.pipeline.schedule_file.empty(), "--on-straggler replan re-plans a generated "
                   "schedule; it cannot change --schedule-file's");
  if (!s.rank_speed.empty()) {
    const std::string text = speeds_text(s.rank_speed);
    parse_speeds(text);  // each speed in its range, as the command line's
    DUALPIPE_REQUIRE(static_cast<int>(s.rank_speed.size()) == c.parallel.pp, "--rank-speed '", text, "' has ",
                     s.rank_speed.size(), " values for --ranks ", c.parallel.pp, "; give one per pipeline rank");
  }
  if (!c.stragglers.emulate_slow_rank.empty()) {
    DUALPIPE_REQUIRE(!c.device.emulate.empty(), "--emulate-slow-rank slows the emulated device: give "
                     "--emulate-device COSTS");
    parse_slow_rank(c.stragglers.emulate_slow_rank, c.parallel.pp);
  }
}

// --cp's rules: every rank holds two equal chunks of each sequence, and the features it does not cover are refused.
void check_context_parallel(const ParallelismConfig& p, const ModelConfig& m) {
  DUALPIPE_REQUIRE(p.cp >= 1 && p.cp <= 64, "--cp must be between 1 and 64, got ", p.cp);
  if (p.cp == 1) return;
  DUALPIPE_REQUIRE(m.seq_len % (2 * p.cp) == 0, "--seq-len ", m.seq_len, " does not divide into 2 x --cp ", p.cp, " = ",
                   2 * p.cp, " chunks: each context-parallel rank holds two equal chunks of every sequence");
  DUALPIPE_REQUIRE(!p.sp, "--cp with --sp is not supported yet: use --cp with --tp alone");
}

// --tp's rules: every tensor-parallel layer splits evenly, and the features it does not cover yet are refused.
void check_tensor_parallel(const ParallelismConfig& p, const ModelConfig& m, const PipelineConfig& pipeline) {
  DUALPIPE_REQUIRE(p.tp >= 1 && p.tp <= 64, "--tp must be between 1 and 64, got ", p.tp);
  DUALPIPE_REQUIRE(!p.sp || p.tp > 1, "--sp needs --tp above 1, got --tp ", p.tp,
                   ": sequence parallelism shards what tensor parallelism leaves whole");
  DUALPIPE_REQUIRE(!p.sp || m.seq_len % p.tp == 0, "--seq-len ", m.seq_len, " must be divisible by --tp ", p.tp,
                   " with --sp: each tensor-parallel rank holds an equal part of the sequence");
  if (p.tp == 1) return;
  DUALPIPE_REQUIRE(m.heads % p.tp == 0, "--tp ", p.tp, " must divide --heads ", m.heads,
                   ": attention is split by heads, the same number on every tensor-parallel rank");
  // --heads divides --hidden (GptConfig::check), so T divides the hidden size and the MLP's 4 x hidden too.
  DUALPIPE_REQUIRE(kVocabulary % p.tp == 0, "--tp ", p.tp, " must divide the vocabulary of ", kVocabulary,
                   " tokens: the embedding and the head are split by vocabulary");
  DUALPIPE_REQUIRE(!pipeline.recompute || p.ep == 1 || !pipeline.fb_overlap ||
                       pipeline.fb_overlap_mode == OverlapMode::Phases,
                   "--recompute with --tp ", p.tp, " and --ep ", p.ep, " needs --no-fb-overlap or --fb-overlap-mode "
                   "phases: on two threads the overlapped backward would run a forward's tensor-parallel collectives "
                   "beside the other half's");
}

// The trainer's limits of each size, then the sizes' own rules (parallel_dims.h), which `dualpipe layout` applies too.
void check_parallelism(const ParallelismConfig& p, const ModelConfig& m, const PipelineConfig& pipeline) {
  DUALPIPE_REQUIRE(p.dp >= 1 && p.dp <= 1024, "--dp must be between 1 and 1024, got ", p.dp);
  DUALPIPE_REQUIRE(p.zero == ZeroStage::None || p.dp > 1, "--zero ", number_of(p.zero), " needs --dp above 1, got --dp ",
                   p.dp, ": it shards over the data-parallel replicas");
  check_tensor_parallel(p, m, pipeline);
  check_context_parallel(p, m);
  parallel::check(p, m.experts, parallel::DimsSpelling::Options);
}

// A report must come before the ranks give up (half the timeout), and a wait shorter than a second is a healthy
// run's (a step's slowest message), not a stall. The default, 10 s, is cut to half of a shorter --timeout.
void check_waits(const DeviceConfig& d) {
  // The ranks' rendezvous alone takes about a second (LibTorch loads), so a shorter wait fails every run.
  DUALPIPE_REQUIRE(d.timeout_seconds >= 1 && d.timeout_seconds <= 86400,
                   "--timeout must be between 1 and 86400 seconds, got ", d.timeout_seconds);
  const double after = d.stall_report_after;
  DUALPIPE_REQUIRE(after == 0 || (after >= 1 && after <= 86400),
                   "--stall-report-after must be 0 (only on SIGUSR1) or between 1 and 86400 seconds, got ", after);
  DUALPIPE_REQUIRE(after == DeviceConfig{}.stall_report_after || after <= d.timeout_seconds / 2,
                   "--stall-report-after ", after, " must be at most half of --timeout ", d.timeout_seconds,
                   ", so that the report comes before the ranks give up waiting");
}

void check_optimizer(const OptimizerConfig& o) {
  DUALPIPE_REQUIRE(o.steps >= 1 && o.steps <= 10000000, "--steps must be between 1 and 10^7, got ", o.steps);
  DUALPIPE_REQUIRE(std::isfinite(o.weight_decay) && o.weight_decay >= 0 && o.weight_decay < 1,
                   "--weight-decay must be in [0, 1), got ", o.weight_decay);
  DUALPIPE_REQUIRE(std::isfinite(o.clip) && o.clip >= 0, "--clip must be 0 (off) or a positive norm, got ", o.clip);
  DUALPIPE_REQUIRE(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, "AdamW betas must be in [0, 1), got ",
                   o.beta1, " and ", o.beta2);
}

void check_outputs(const OutputsConfig& o) {
  DUALPIPE_REQUIRE(o.eval_every >= 0, "--eval-every must be 0 (only before and after) or more steps, got ",
                   o.eval_every);
  DUALPIPE_REQUIRE(o.sample_tokens >= 0 && o.sample_tokens <= 100000,
                   "--sample-tokens must be between 0 and 100000, got ", o.sample_tokens);
  DUALPIPE_REQUIRE(std::isfinite(o.temperature) && o.temperature >= 0 && o.temperature <= 100,
                   "--temperature must be between 0 (greedy) and 100, got ", o.temperature);
  DUALPIPE_REQUIRE(o.sample_tokens == 0 || !o.prompt.empty(), "--prompt must not be empty (or use --sample-tokens 0)");
  DUALPIPE_REQUIRE(std::isfinite(o.act_bytes) && o.act_bytes >= 0, "--act-bytes must be a number of bytes >= 0, got ",
                   o.act_bytes);
}

}  // namespace

void check_options(const TrainConfig& c) {
  DUALPIPE_REQUIRE(c.parallel.pp >= 1 && c.parallel.pp <= 64, "--ranks must be between 1 and 64 local processes, got ",
                   c.parallel.pp);
  DUALPIPE_REQUIRE(c.pipeline.microbatches >= 1 && c.pipeline.microbatches <= 4096,
                   "--microbatches must be between 1 and 4096, got ", c.pipeline.microbatches);
  DUALPIPE_REQUIRE(c.data.batch >= 1 && c.data.batch <= 65536,
                   "--batch (sequences per micro-batch) must be between 1 and 65536, got ", c.data.batch);
  check_optimizer(c.optimizer);
  check_outputs(c.outputs);
  check_waits(c.device);
  const CheckpointConfig& k = c.checkpoint;
  DUALPIPE_REQUIRE(k.save_every >= 0 && k.keep >= 0, "--save-every and --keep must be 0 or more, got ", k.save_every,
                   " and ", k.keep);
  DUALPIPE_REQUIRE(!k.dir.empty() || (k.save_every == 0 && !k.resume && k.keep == 0),
                   "--save-every, --keep and --resume need --checkpoint-dir DIR");
  check_parallelism(c.parallel, c.model, c.pipeline);
  check_stragglers(c);
}

Schedule schedule_of(const TrainConfig& c) {
  if (c.pipeline.schedule_file.empty()) {
    ScheduleOptions options;
    options.num_ranks = c.parallel.pp;
    options.num_microbatches = c.pipeline.microbatches;
    options.stages_per_rank = c.pipeline.stages_per_rank;
    return make_schedule(c.pipeline.schedule, options);
  }
  Schedule schedule = read_schedule_file(c.pipeline.schedule_file);
  validate(schedule);
  const std::string data_parallel = first_data_parallel_action(schedule);
  DUALPIPE_REQUIRE(data_parallel.empty(), "--schedule-file '", c.pipeline.schedule_file, "' holds data-parallel actions (",
                   data_parallel, "): dualpipe train places UNSHARD, RESHARD and REDUCE_GRAD itself from --dp and "
                   "--zero; give the schedule without them (dualpipe schedule or plan without --dp and --zero)");
  DUALPIPE_REQUIRE(schedule.num_ranks == c.parallel.pp && schedule.num_microbatches == c.pipeline.microbatches,
                   "--schedule-file '", c.pipeline.schedule_file, "' has ", schedule.num_ranks, " ranks and ",
                   schedule.num_microbatches, " micro-batches, but --ranks is ", c.parallel.pp, " and --microbatches ",
                   c.pipeline.microbatches);
  return schedule;
}

std::string unsupported_model(const ModelFeatures& m) {
  if (m.vocab != kVocabulary)
    return "the trainer's model reads bytes (vocab " + std::to_string(kVocabulary) + "), this one has vocab " +
           std::to_string(m.vocab);
  if (m.gated_ffn || m.ffn_hidden != 4 * m.hidden) return "the trainer's MLP is 4 x hidden with GELU";
  if (m.kv_heads != 0 && m.kv_heads != m.heads) return "the trainer has no grouped-query attention";
  if (m.tied_embeddings) return "the trainer does not tie its embeddings";
  if (m.experts > 0 && (m.expert_ffn_hidden != 4 * m.hidden || m.shared_experts > 0 || m.dense_layers > 0 ||
                        m.moe_layer_freq != 1))
    return "the trainer's MoE layers are all layers, experts of 4 x hidden, none shared";
  return "";
}

}  // namespace dualpipe::run
