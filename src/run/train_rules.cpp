#include "dualpipe/run/train_rules.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "dualpipe/data/byte_tokenizer.h"
#include "dualpipe/run/straggler.h"
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
  DUALPIPE_REQUIRE(std::isfinite(c.straggler_threshold) && c.straggler_threshold > 1 && c.straggler_threshold <= 100,
                   "--straggler-threshold must be above 1 and at most 100 (times the median), got ",
                   c.straggler_threshold);
  DUALPIPE_REQUIRE(c.straggler_steps >= 1 && c.straggler_steps <= 100000,
                   "--straggler-steps must be between 1 and 100000, got ", c.straggler_steps);
  DUALPIPE_REQUIRE(c.on_straggler == "report" || c.on_straggler == "replan", "--on-straggler must be report or "
                   "replan, got '", c.on_straggler, "'");
  DUALPIPE_REQUIRE(c.on_straggler != "replan" || !c.checkpoint_dir.empty(), "--on-straggler replan needs "
                   "--checkpoint-dir DIR: the re-planned ranks continue from the checkpoint it saves there");
  DUALPIPE_REQUIRE(c.on_straggler != "replan" || c.schedule_file.empty(), "--on-straggler replan re-plans a "
                   "generated schedule; it cannot change --schedule-file's");
  if (!c.rank_speed.empty()) {
    const std::vector<double> speeds = parse_rank_speed(c.rank_speed);
    DUALPIPE_REQUIRE(static_cast<int>(speeds.size()) == c.ranks, "--rank-speed '", c.rank_speed, "' has ",
                     speeds.size(), " values for --ranks ", c.ranks, "; give one per pipeline rank");
  }
  if (!c.emulate_slow_rank.empty()) {
    DUALPIPE_REQUIRE(!c.emulate_device.empty(), "--emulate-slow-rank slows the emulated device: give "
                     "--emulate-device COSTS");
    parse_slow_rank(c.emulate_slow_rank, c.ranks);
  }
}

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
  DUALPIPE_REQUIRE(kVocabulary % c.tp == 0, "--tp ", c.tp, " must divide the vocabulary of ", kVocabulary,
                   " tokens: the embedding and the head are split by vocabulary");
  DUALPIPE_REQUIRE(!c.recompute || c.ep == 1 || !c.fb_overlap || c.fb_overlap_mode == "phases", "--recompute with "
                   "--tp ", c.tp, " and --ep ", c.ep, " needs --no-fb-overlap or --fb-overlap-mode phases: on two "
                   "threads the overlapped backward would run a forward's tensor-parallel collectives beside the other "
                   "half's");
}

// A report must come before the ranks give up (half the timeout), and a wait shorter than a second is a healthy
// run's (a step's slowest message), not a stall. The default, 10 s, is cut to half of a shorter --timeout.
void check_stall_report_after(const TrainConfig& c) {
  const double after = c.stall_report_after;
  DUALPIPE_REQUIRE(after == 0 || (after >= 1 && after <= 86400),
                   "--stall-report-after must be 0 (only on SIGUSR1) or between 1 and 86400 seconds, got ", after);
  DUALPIPE_REQUIRE(after == TrainConfig{}.stall_report_after || after <= c.timeout_seconds / 2,
                   "--stall-report-after ", after, " must be at most half of --timeout ", c.timeout_seconds,
                   ", so that the report comes before the ranks give up waiting");
}

}  // namespace

void check_options(const TrainConfig& c) {
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
  // The ranks' rendezvous alone takes about a second (LibTorch loads), so a shorter wait fails every run.
  DUALPIPE_REQUIRE(c.timeout_seconds >= 1 && c.timeout_seconds <= 86400,
                   "--timeout must be between 1 and 86400 seconds, got ", c.timeout_seconds);
  check_stall_report_after(c);
  DUALPIPE_REQUIRE(c.save_every >= 0 && c.keep >= 0, "--save-every and --keep must be 0 or more, got ", c.save_every,
                   " and ", c.keep);
  DUALPIPE_REQUIRE(c.dp >= 1 && c.dp <= 1024, "--dp must be between 1 and 1024, got ", c.dp);
  zero_stage(c.zero, "--zero");
  DUALPIPE_REQUIRE(c.zero == 0 || c.dp > 1, "--zero ", c.zero, " needs --dp above 1, got --dp ", c.dp,
                   ": it shards over the data-parallel replicas");
  DUALPIPE_REQUIRE(!c.checkpoint_dir.empty() || (c.save_every == 0 && !c.resume && c.keep == 0),
                   "--save-every, --keep and --resume need --checkpoint-dir DIR");
  DUALPIPE_REQUIRE(c.ep >= 1 && c.dp % c.ep == 0, "--ep ", c.ep, " must divide --dp ", c.dp,
                   ": expert parallelism runs across the data-parallel replicas of a stage");
  DUALPIPE_REQUIRE(c.ep == 1 || c.experts > 0, "--ep ", c.ep, " needs an MoE model: give --experts N");
  DUALPIPE_REQUIRE(std::find(std::begin(kOverlapModes), std::end(kOverlapModes), c.fb_overlap_mode) !=
                       std::end(kOverlapModes),
                   "--fb-overlap-mode must be phases, threads or turns, got '", c.fb_overlap_mode, "'");
  check_tensor_parallel(c);
  check_context_parallel(c);
  check_stragglers(c);
  DUALPIPE_REQUIRE(c.experts <= 0 || c.experts % c.ep == 0, "--experts ", c.experts, " must be divisible by --ep ",
                   c.ep, ": each rank of an expert-parallel group holds the same number of experts");
}

Schedule schedule_of(const TrainConfig& c) {
  if (c.schedule_file.empty()) {
    ScheduleOptions options;
    options.num_ranks = c.ranks;
    options.num_microbatches = c.microbatches;
    options.stages_per_rank = c.stages_per_rank;
    return make_schedule(c.schedule, options);
  }
  Schedule schedule = read_schedule_file(c.schedule_file);
  validate(schedule);
  const std::string data_parallel = first_data_parallel_action(schedule);
  DUALPIPE_REQUIRE(data_parallel.empty(), "--schedule-file '", c.schedule_file, "' holds data-parallel actions (",
                   data_parallel, "): dualpipe train places UNSHARD, RESHARD and REDUCE_GRAD itself from --dp and "
                   "--zero; give the schedule without them (dualpipe schedule or plan without --dp and --zero)");
  DUALPIPE_REQUIRE(schedule.num_ranks == c.ranks && schedule.num_microbatches == c.microbatches,
                   "--schedule-file '", c.schedule_file, "' has ", schedule.num_ranks, " ranks and ",
                   schedule.num_microbatches, " micro-batches, but --ranks is ", c.ranks, " and --microbatches ",
                   c.microbatches);
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
