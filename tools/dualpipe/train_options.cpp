#include "train_options.h"

#include <cmath>
#include <cstdio>

#include "dualpipe/error.h"
#include "dualpipe/generators.h"

namespace dualpipe::cli {

void add_train_options(CLI::App& sub, TrainOptions& o) {
  std::string kinds;
  for (const GeneratorInfo& g : generators()) kinds += (kinds.empty() ? "" : ", ") + std::string(g.name);
  sub.add_option("-s,--schedule", o.schedule, "Schedule kind: " + kinds)->capture_default_str();
  sub.add_option("-r,--ranks", o.ranks, "Pipeline ranks, one local process each")->capture_default_str();
  sub.add_option("-m,--microbatches", o.microbatches, "Micro-batches per step (the schedule's rules apply)")
      ->capture_default_str();
  sub.add_option("-v,--stages-per-rank", o.stages_per_rank, "Stages per rank for interleaved-1f1b (0: default)");
  sub.add_option("-n,--steps", o.steps, "Training steps")->capture_default_str();
  sub.add_option("--hidden", o.hidden, "Hidden size h of the blocks")->capture_default_str();
  sub.add_option("-b,--batch", o.batch, "Rows per micro-batch")->capture_default_str();
  sub.add_option("--layers", o.layers, "Residual blocks in the whole model, a multiple of the stage count")
      ->capture_default_str();
  sub.add_option("--optimizer", o.optimizer, "adam or sgd")->capture_default_str();
  sub.add_option("--lr", o.lr, "Learning rate (default: 0.003 for adam, 0.3 for sgd)");
  sub.add_option("--seed", o.seed, "Seed of the weights, the teacher and the data")->capture_default_str();
  sub.add_option("--trace", o.trace, "Where rank 0 writes the merged Chrome trace (empty: none)")
      ->capture_default_str();
  sub.add_option("--timeout", o.timeout_seconds,
                 "Seconds a rank waits for a peer (rendezvous, messages) before failing with its name")
      ->capture_default_str();
  sub.add_option("--act-bytes", o.act_bytes,
                 "Bytes of one stage's activations for one micro-batch (simulate's act_bytes): prints the planned "
                 "peak in bytes beside the measured one");
}

double learning_rate(const TrainOptions& o) {
  if (o.lr > 0) return o.lr;
  return o.optimizer == "sgd" ? kDefaultSgdLr : kDefaultAdamLr;
}

Schedule check_train_options(const TrainOptions& o) {
  DUALPIPE_REQUIRE(o.ranks >= 1 && o.ranks <= 64, "--ranks must be between 1 and 64 local processes, got ", o.ranks);
  DUALPIPE_REQUIRE(o.microbatches >= 1, "--microbatches must be at least 1, got ", o.microbatches);
  DUALPIPE_REQUIRE(o.steps >= 1, "--steps must be at least 1, got ", o.steps);
  DUALPIPE_REQUIRE(o.hidden >= 1 && o.hidden <= 8192, "--hidden must be between 1 and 8192, got ", o.hidden);
  DUALPIPE_REQUIRE(o.batch >= 1, "--batch (rows per micro-batch) must be at least 1, got ", o.batch);
  DUALPIPE_REQUIRE(o.layers >= 1, "--layers must be at least 1, got ", o.layers);
  DUALPIPE_REQUIRE(o.optimizer == "adam" || o.optimizer == "sgd", "--optimizer must be adam or sgd, got '",
                   o.optimizer, "'");
  DUALPIPE_REQUIRE(o.lr >= 0 && std::isfinite(o.lr), "--lr must be a positive number, got ", o.lr);
  DUALPIPE_REQUIRE(o.act_bytes >= 0 && std::isfinite(o.act_bytes), "--act-bytes must be a number of bytes >= 0, got ",
                   o.act_bytes);
  DUALPIPE_REQUIRE(o.timeout_seconds > 0 && o.timeout_seconds <= 86400,
                   "--timeout must be between 0 and 86400 seconds, got ", o.timeout_seconds);
  ScheduleOptions so;
  so.num_ranks = o.ranks;
  so.num_microbatches = o.microbatches;
  so.stages_per_rank = o.stages_per_rank;
  Schedule schedule = make_schedule(o.schedule, so);
  DUALPIPE_REQUIRE(o.layers % schedule.num_stages == 0, "--layers ", o.layers, " does not split into the ",
                   schedule.num_stages, " stages of ", o.schedule, " with ", o.ranks,
                   " ranks: use a multiple of the stage count (for example ", 2 * schedule.num_stages, ")");
  return schedule;
}

std::vector<std::string> train_arguments(const TrainOptions& o) {
  char lr[32], timeout[32], act_bytes[32];
  std::snprintf(act_bytes, sizeof act_bytes, "%.17g", o.act_bytes);
  std::snprintf(lr, sizeof lr, "%.17g", o.lr);
  std::snprintf(timeout, sizeof timeout, "%.17g", o.timeout_seconds);
  return {"--schedule", o.schedule,
          "--ranks", std::to_string(o.ranks),
          "--microbatches", std::to_string(o.microbatches),
          "--stages-per-rank", std::to_string(o.stages_per_rank),
          "--steps", std::to_string(o.steps),
          "--hidden", std::to_string(o.hidden),
          "--batch", std::to_string(o.batch),
          "--layers", std::to_string(o.layers),
          "--optimizer", o.optimizer,
          "--lr", lr,
          "--seed", std::to_string(o.seed),
          "--trace", o.trace,
          "--timeout", timeout,
          "--act-bytes", act_bytes};
}

}  // namespace dualpipe::cli
