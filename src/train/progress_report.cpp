#include "progress_report.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <iostream>

#include "dualpipe/util/printable.h"
#include "dualpipe/sim/activation_memory.h"
#include "dualpipe/schedule/zero_stage.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/run/train_options.h"
#include "dualpipe/util/error.h"
#include "dualpipe/util/number_format.h"
#include "correctness_checks.h"

namespace dualpipe::train {
namespace {

using nlohmann::json;

std::string millions(int64_t n) { return fixed(n / 1e6, 2) + "M"; }

// One figure of every rank's state bytes.
std::vector<double> per_rank(const std::vector<parallel::StateBytes>& ranks, double parallel::StateBytes::*figure) {
  std::vector<double> values;
  for (const parallel::StateBytes& r : ranks) values.push_back(r.*figure);
  return values;
}

// Every rank's parameters, gradients and optimizer state in bytes, as a record's field.
json state_json(const std::vector<parallel::StateBytes>& ranks) {
  return {{"parameters", per_rank(ranks, &parallel::StateBytes::parameters)},
          {"gradients", per_rank(ranks, &parallel::StateBytes::gradients)},
          {"optimizer", per_rank(ranks, &parallel::StateBytes::optimizer)}};
}

// "LABEL a b c", and with `sharded` "; predicted (WHY): x y z", in MiB per rank.
void print_state_bytes(const char* label, const StepReport& r, double parallel::StateBytes::*figure, bool sharded,
                       const std::string& why) {
  std::cout << label;
  for (double b : per_rank(r.held_bytes, figure)) std::cout << " " << fixed(b / (1 << 20), 2);
  if (sharded) {
    std::cout << "; predicted (" << why << "):";
    for (double b : per_rank(r.predicted_bytes, figure)) std::cout << " " << fixed(b / (1 << 20), 2);
  }
  std::cout << "\n";
}

}  // namespace

ProgressReport::ProgressReport(const TrainConfig& c, const RunPlan& plan, const data::Corpus& corpus,
                               int64_t train_sequences, int64_t validation_sequences)
    : config_(c), plan_(plan), baseline_(corpus.unigram_entropy_nats()) {
  const auto& m = plan.model;
  const int64_t tokens = static_cast<int64_t>(c.parallel.dp) * c.pipeline.microbatches * c.data.batch * c.model.seq_len;
  std::cout << "dualpipe train: a " << millions(m.parameter_count()) << "-parameter transformer language model ("
            << m.layers << " layers, hidden " << m.hidden << ", " << m.heads << " heads, " << m.seq_len
            << "-token context, byte-level vocabulary of " << m.vocab << ")\n";
  if (m.moe.experts > 0)
    std::cout << "  mixture of experts in every block: " << m.moe.experts << " experts, top-" << m.moe.top_k
              << ", capacity factor " << m.moe.capacity_factor << ", load-balancing loss x " << c.model.aux_loss
              << (c.parallel.ep > 1 ? "; experts sharded over expert-parallel groups of " + std::to_string(c.parallel.ep) +
                                 " replicas, forward-backward overlap " +
                                 (!c.pipeline.fb_overlap                      ? "off"
                                  : overlap_mode(c) == run::OverlapMode::Phases  ? "on (phases interleaved on one thread)"
                                  : overlap_mode(c) == run::OverlapMode::Threads ? "on (halves computing at once)"
                                                                 : "on (halves taking turns at each all-to-all)")
                           : "")
              << "\n";
  if (!c.device.emulate.empty())
    std::cout << "  emulated device: every stage's MoE layers sleep for the costs " << c.device.emulate
              << " (milliseconds per stage)"
              << (c.device.emulate_link_rate.empty() ? "" : ", exchanges sized for a link of " + c.device.emulate_link_rate)
              << "; stage 0's layers: " << m.emulated_stages.at(0).forward_us << " us forward, "
              << m.emulated_stages.at(0).exchange_bytes << " bytes per exchange\n";
  std::cout
            << "  schedule " << plan.schedule.kind << " on " << c.parallel.pp << " ranks (one process each), "
            << plan.cut.num_stages() << " stages of " << plan.cut.to_string() << " layers"
            << (c.parallel.tp > 1 ? ", each split over " + std::to_string(c.parallel.tp) + " tensor-parallel ranks" : "")
            << (c.parallel.cp > 1 ? ", each sequence over " + std::to_string(c.parallel.cp) + " context-parallel ranks (" +
                               std::to_string(2 * c.parallel.cp) + " chunks of " + std::to_string(c.model.seq_len / (2 * c.parallel.cp)) +
                               " tokens)"
                         : "")
            << "; "
            << (c.parallel.dp > 1 ? std::to_string(c.parallel.dp) + " data-parallel replicas x " : "") << c.pipeline.microbatches
            << " micro-batches x " << c.data.batch << " sequences = " << tokens << " tokens per step"
            << (c.pipeline.recompute ? "; activation recomputation on" : "") << "\n"
            << "  corpus: " << corpus.source << ", " << corpus.bytes() << " bytes; " << train_sequences
            << " training and " << validation_sequences << " validation sequences\n"
            << "  unigram baseline (byte frequencies alone): " << fixed(baseline_, 4) << " nats per byte\n"
            << "  AdamW lr " << c.optimizer.lr << " (warm-up " << c.optimizer.warmup << " steps, cosine to " << c.optimizer.min_lr
            << "), weight decay " << c.optimizer.weight_decay << ", clip " << c.optimizer.clip << ", " << c.optimizer.steps << " steps, seed "
            << c.data.seed << ", 1 intra-op thread per rank\n\n";
  std::printf("%5s  %9s  %9s  %9s  %8s  %9s  %9s%s\n", "step", "loss", "val loss", "tokens/s", "step ms", "lr",
              "grad norm", m.moe.experts > 0 ? "  aux loss  dropped" : "");
  std::fflush(stdout);

  if (c.outputs.metrics.empty()) return;
  json record = {{"type", "config"}};
  for (const run::TrainOption& option : run::train_options())  // every option, as given
    record[run::record_key(option)] = run::record_value(option, c);
  // What the options made: the schedule that runs (its kind, "custom" from a file), the cut, the corpus.
  record["schedule"] = plan.schedule.kind;
  record["stage_cut"] = plan.cut.to_string();
  record["parameters"] = m.parameter_count();
  record["corpus"] = corpus.source;
  record["corpus_bytes"] = corpus.bytes();
  record["unigram_baseline"] = baseline_;
  config_record_ = record.dump();
  // A run that may resume opens the file once it knows from which step (open_metrics).
  if (!c.checkpoint.resume) open_metrics(0);
}

void ProgressReport::open_metrics(int resumed_step) {
  if (config_.outputs.metrics.empty()) return;
  // The records the earlier run wrote up to the checkpoint stay, so that the file reads as one run: its steps up
  // to `resumed_step` and its evaluations before it (this run evaluates `resumed_step` again).
  std::vector<std::string> kept;
  std::ifstream previous(resumed_step > 0 ? config_.outputs.metrics : std::string());
  for (std::string line; previous && std::getline(previous, line);) {
    const json record = json::parse(line, nullptr, false);
    if (!record.is_object() || !record.contains("step") || !record["step"].is_number_integer()) continue;
    const int step = record["step"].get<int>();
    const std::string type = record.value("type", "");
    const bool noted = type == "straggler" || type == "replan";  // what the run found and did, up to then
    if (((type == "step" || noted) && step <= resumed_step) || (type == "eval" && step < resumed_step))
      kept.push_back(line);
  }
  previous.close();
  const std::string partial = config_.outputs.metrics + ".partial";
  {
    std::ofstream out(partial, std::ios::trunc);
    out << config_record_ << '\n';
    for (const std::string& line : kept) out << line << '\n';
    out.flush();
    DUALPIPE_REQUIRE(out, "--metrics '", config_.outputs.metrics, "' cannot be written (", partial, ")");
  }
  DUALPIPE_REQUIRE(std::rename(partial.c_str(), config_.outputs.metrics.c_str()) == 0, "--metrics '", config_.outputs.metrics,
                   "' cannot be written: ", std::strerror(errno));
  metrics_.open(config_.outputs.metrics, std::ios::app);
  DUALPIPE_REQUIRE(metrics_, "--metrics '", config_.outputs.metrics, "' cannot be written");
}

void ProgressReport::no_checkpoint() {
  std::printf("       no complete checkpoint in %s: starting from step 0\n", config_.checkpoint.dir.c_str());
  std::fflush(stdout);
  open_metrics(0);
}


void ProgressReport::write_metrics(const std::string& line) {
  if (!metrics_.is_open()) return;
  metrics_ << line << '\n';
  metrics_.flush();
  DUALPIPE_REQUIRE(metrics_, "--metrics '", config_.outputs.metrics, "': write failed (disk full?)");
}

void ProgressReport::resumed(const std::string& directory, int step, int planned_steps,
                             const std::vector<std::string>& skipped) {
  for (const auto& s : skipped) std::printf("       skipping incomplete checkpoint %s (no manifest)\n", s.c_str());
  std::printf("       resumed from %s after step %d\n", directory.c_str(), step);
  open_metrics(step);
  if (planned_steps != config_.optimizer.steps)
    std::printf("       warning: the checkpoint was written by a run of %d steps and this run has --steps %d: the "
                "learning-rate schedule changes from here on\n",
                planned_steps, config_.optimizer.steps);
  std::fflush(stdout);
}

void ProgressReport::step(const StepReport& r) {
  steps_.push_back(r);
  std::printf("%5d  %9.4f  %9s  %9.0f  %8.1f  %9.2e  %9.3f", r.step, r.loss, "", r.tokens_per_s, r.step_ms, r.lr,
              r.grad_norm);
  if (config_.model.experts > 0) std::printf("  %8.4f  %6.2f%%", r.moe_aux_loss, 100 * r.moe_dropped);
  std::printf("\n");
  std::fflush(stdout);
  json peaks = r.peak_activation_bytes;
  json record = json{{"type", "step"},
                     {"step", r.step}, {"loss", r.loss}, {"tokens_per_s", r.tokens_per_s}, {"step_ms", r.step_ms},
                     {"lr", r.lr}, {"grad_norm", r.grad_norm}, {"bubble", r.bubble}, {"dp_wait_ms", r.dp_wait_ms},
                     {"peak_activation_bytes", peaks},
                     {"optimizer_state_bytes", per_rank(r.held_bytes, &parallel::StateBytes::optimizer)},
                     {"gradient_bytes", per_rank(r.held_bytes, &parallel::StateBytes::gradients)},
                     {"parameter_bytes", per_rank(r.held_bytes, &parallel::StateBytes::parameters)}};
  if (config_.model.experts > 0) {
    record["moe_aux_loss"] = r.moe_aux_loss;
    record["moe_dropped"] = r.moe_dropped;
  }
  if (config_.parallel.ep > 1) {
    record["all_to_all_ms"] = r.all_to_all_ms;
    record["all_to_all_exposed_ms"] = r.all_to_all_exposed_ms;
  }
  write_metrics(record.dump());
}

void ProgressReport::evaluation(int step, double val_loss) {
  if (first_val_ < 0) first_val_ = val_loss;
  last_val_ = val_loss;
  std::printf("%5d  %9s  %9.4f\n", step, "", val_loss);
  std::fflush(stdout);
  write_metrics(json{{"type", "eval"}, {"step", step}, {"val_loss", val_loss}}.dump());
}

void ProgressReport::reference_check(int losses, int gradients, double worst_cosine) {
  if (config_.parallel.tp > 1 || config_.parallel.cp > 1)
    std::printf("       step matches the single-process reference: %d losses within a relative %.0e, %d gradient "
                "%s within cosine distance %.0e (worst %.1e; %s parallelism sums in another order)\n",
                losses, kMaxTensorParallelLossError, gradients, config_.parallel.tp > 1 ? "slices" : "tensors",
                kMaxTensorParallelGradientCosineDistance, worst_cosine, config_.parallel.tp > 1 ? "tensor" : "context");
  else
    std::printf("       step matches the single-process reference: %d losses bit-identical, %d gradients within "
                "cosine distance %.0e (worst %.1e)\n",
                losses, gradients, kMaxGradientCosineDistance, worst_cosine);
  std::fflush(stdout);
  const bool exact = config_.parallel.tp == 1 && config_.parallel.cp == 1;  // else the losses are compared to a relative tolerance
  const double bound = exact ? kMaxGradientCosineDistance : kMaxTensorParallelGradientCosineDistance;
  write_metrics(json{{"type", "reference_check"}, {"step", 1}, {"losses", losses}, {"losses_bit_identical", exact},
                     {"gradients", gradients}, {"worst_cosine_distance", worst_cosine}, {"max_cosine_distance", bound}}
                    .dump());
}

void ProgressReport::data_parallel_replicas_identical(int tensors, int replicas) {
  std::printf("data-parallel replicas identical: all %d parameter tensors of replica 0 bit-identical in all %d "
              "replicas\n", tensors, replicas);
  write_metrics(json{{"type", "replicas_identical"}, {"of", "data_parallel"}, {"tensors", tensors},
                     {"replicas", replicas}}
                    .dump());
}

void ProgressReport::checkpoint_saved(const std::string& directory) {
  std::printf("       checkpoint %s\n", directory.c_str());
  std::fflush(stdout);
}

void ProgressReport::summary(int replica_tensors_compared, const std::string& trace_path, size_t trace_events,
                             double half_rtt_us, const std::string& sample) {
  const Schedule& s = plan_.schedule;
  std::cout << "\n";
  if (s.placement.num_replicas() < 2) {
    std::cout << "replicas: one copy of every stage under " << s.kind << ", nothing to compare\n";
  } else {
    std::cout << "replicas identical: all " << replica_tensors_compared << " parameter tensors bit-identical between "
              << "the two copies of every stage\n";
    write_metrics(json{{"type", "replicas_identical"}, {"of", "stage_copies"}, {"tensors", replica_tensors_compared},
                       {"replicas", 2}}
                      .dump());
  }
  if (!steps_.empty()) {
    const size_t R = steps_.front().peak_activation_bytes.size();
    std::vector<double> peak_bytes(R, 0);
    std::vector<int> peak_live(R, 0);
    for (const auto& r : steps_)
      for (size_t i = 0; i < R; ++i) {
        peak_bytes[i] = std::max(peak_bytes[i], r.peak_activation_bytes[i]);
        peak_live[i] = std::max(peak_live[i], r.peak_live_activations[i]);
      }
    std::string bytes, live, planned, planned_recomputed;
    for (double b : peak_bytes) bytes += " " + fixed(b / (1 << 20), 2);
    for (int p : peak_live) live += " " + std::to_string(p);
    const std::vector<int> plan = peak_activations(s);
    for (int p : plan) planned += " " + std::to_string(p);
    CostModel recomputed;
    recomputed.recompute = true;
    for (double p : activation_peaks(s, recomputed)) planned_recomputed += " " + fixed(p, 2);
    std::cout << "peak activation MiB per rank" << (config_.pipeline.recompute ? " (with recomputation):" : ":") << bytes
              << " measured";
    if (config_.outputs.act_bytes > 0) {
      std::string planned_bytes;
      for (int p : plan) planned_bytes += " " + fixed(p * config_.outputs.act_bytes / (1 << 20), 2);
      std::cout << "," << planned_bytes << " planned (act_bytes=" << config_.outputs.act_bytes << ")";
    }
    std::cout << "\npeak live stage activations per rank:" << live << " measured," << planned << " planned";
    if (config_.pipeline.recompute)
      std::cout << " without recomputation," << planned_recomputed << " planned with it (input_mem "
                << recomputed.input_mem << ")";
    std::cout << "\n";

    const StepReport& last = steps_.back();
    const ZeroStage zero = config_.parallel.zero;
    print_state_bytes("parameter MiB per rank after the step:", last, &parallel::StateBytes::parameters,
                      shards_parameters(zero), "ZeRO-3: each sharded tensor on its owner alone");
    print_state_bytes("gradient MiB per rank after the reduction:", last, &parallel::StateBytes::gradients,
                      shards_gradients(zero),
                      detail::concat("ZeRO-", number_of(zero), ": each sharded tensor on its owner alone"));
    print_state_bytes("optimizer state MiB per rank:", last, &parallel::StateBytes::optimizer,
                      shards_optimizer_state(zero),
                      detail::concat("ZeRO-", number_of(zero), ": sharded over the ", config_.parallel.dp, " replicas"));
    write_metrics(json{{"type", "state_bytes"}, {"step", last.step}, {"zero", number_of(zero)},
                       {"held", state_json(last.held_bytes)}, {"predicted", state_json(last.predicted_bytes)}}
                      .dump());
    double ms = 0, tokens = 0;
    int n = 0;
    for (const auto& r : steps_)
      if (r.step > steps_.front().step || steps_.size() == 1) {
        ms += r.step_ms;
        tokens += r.tokens_per_s;
        ++n;
      }
    std::cout << "loss " << fixed(steps_.front().loss, 4) << " -> " << fixed(last.loss, 4);
    if (last_val_ >= 0)
      std::cout << "; validation " << fixed(first_val_, 4) << " -> " << fixed(last_val_, 4) << " ("
                << (last_val_ < baseline_ ? fixed(baseline_ - last_val_, 3) + " below" :
                                            fixed(last_val_ - baseline_, 3) + " above")
                << " the unigram baseline " << fixed(baseline_, 4) << ")";
    std::cout << "\nmean step " << fixed(ms / std::max(n, 1), 1) << " ms, " << fixed(tokens / std::max(n, 1), 0)
              << " tokens/s (after the first step)\n";
  }
  if (!trace_path.empty())
    std::cout << "trace: " << trace_path << " (" << trace_events << " events, clocks aligned to rank 0 within "
              << fixed(half_rtt_us, 0) << " us); dualpipe compare --trace " << trace_path << "\n";
  if (!sample.empty()) std::cout << "\nsample (" << config_.outputs.sample_tokens << " bytes after the prompt, temperature "
                                 << config_.outputs.temperature << "):\n" << printable(sample) << "\n";
  std::cout.flush();
}

}  // namespace dualpipe::train
