// What rank 0 tells the user and the metrics file while training (internal to the trainer): the header, one
// line per step and per evaluation, the checks, the summary and the sample. Metrics are JSON lines (docs/train.md):
// a config record, then step and eval records, with every float at full precision so that runs compare exactly.
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include "dualpipe/data/corpus.h"
#include "dualpipe/train/run_plan.h"
#include "dualpipe/parallel/state_bytes.h"

namespace dualpipe::train {

// One step as measured on every rank, reduced on rank 0.
struct StepReport {
  int step = 0;
  double loss = 0, step_ms = 0, tokens_per_s = 0, lr = 0, grad_norm = 0;
  double bubble = 0;  // (max span - max busy) / max span over ranks
  double dp_wait_ms = 0;  // the longest wait of a rank for its data-parallel gradient reduction
  double moe_aux_loss = 0;  // the mean load-balancing loss of the MoE layers over every micro-batch
  double moe_dropped = 0;   // the fraction of their routed choices dropped for capacity
  // The expert all-to-alls of the rank that spent longest in them (expert_timeline.h): their time, and the part
  // of it no thread of the rank computed.
  double all_to_all_ms = 0, all_to_all_exposed_ms = 0;
  std::vector<double> peak_activation_bytes;  // per rank
  std::vector<int> peak_live_activations;     // per rank
  // Per rank after the step: the parameters, gradients (after the data-parallel reduction) and AdamW moments held
  // (shards under ZeRO), and the ZeRO paper's figures for them.
  std::vector<parallel::StateBytes> held_bytes, predicted_bytes;
};

class ProgressReport {
 public:
  // Prints the run's header. Without --resume, opens --metrics (truncating it) and writes the config record; with
  // it, resumed() or no_checkpoint() does.
  ProgressReport(const TrainConfig& config, const RunPlan& plan, const data::Corpus& corpus, int64_t train_sequences,
                 int64_t validation_sequences);

  // Also rewrites --metrics as the config record and the earlier run's records up to `step`, then appends.
  void resumed(const std::string& directory, int step, int planned_steps, const std::vector<std::string>& skipped);
  void no_checkpoint();
  void step(const StepReport& report);
  void evaluation(int step, double val_loss);
  // Step 1 against the single-process run, and, at the end, the data-parallel replicas against replica 0: a line
  // and a record each ("reference_check", "replicas_identical"), the record what a program (or a test) reads.
  void reference_check(int losses, int gradients, double worst_cosine);
  void data_parallel_replicas_identical(int tensors, int replicas);
  void checkpoint_saved(const std::string& directory);
  void record(const std::string& json_line) { write_metrics(json_line); }  // a record of its own (a straggler)
  // The end: replica check, memory (measured and planned), losses against the baseline, timing, trace, sample.
  void summary(int replica_tensors_compared, const std::string& trace_path, size_t trace_events, double half_rtt_us,
               const std::string& sample);

 private:
  void write_metrics(const std::string& json_line);
  void open_metrics(int resumed_step);  // 0: a fresh run

  const TrainConfig& config_;
  const RunPlan& plan_;
  double baseline_ = 0;
  std::string config_record_;
  std::ofstream metrics_;
  std::vector<StepReport> steps_;
  double first_val_ = -1, last_val_ = -1;
};

}  // namespace dualpipe::train
