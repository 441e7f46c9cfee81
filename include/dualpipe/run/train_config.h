// Everything one training run is made of, in sections, each component of the trainer taking the sections it uses:
// the command line of `dualpipe train` maps onto it one to one (run/train_options.h), a C++ user fills it in
// directly (as train::TrainConfig), and `dualpipe layout` fills it for the layouts it plans. Words with a fixed set
// of values are enums and lists are vectors, parsed once where the text comes in (run/train_values.h).
// LibTorch-free.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "dualpipe/parallel/parallel_dims.h"
#include "dualpipe/schedule/zero_stage.h"

namespace dualpipe::run {

// How the halves of an overlapped forward-backward pair share a rank.
enum class OverlapMode {
  Phases,   // interleaved phase by phase on one thread, each exchange waited for where its result is first used
  Threads,  // the backward on a second thread, both computing at once
  Turns,    // two threads taking turns at each all-to-all (CPU stages only: overlap_mode below)
};
enum class DeviceKind { Cpu, Cuda };
enum class Backend { Auto, Gloo, Nccl };  // Auto: nccl for cuda, gloo for cpu
enum class StragglerAction { Report, Replan };

struct PipelineConfig {
  std::string schedule = "dualpipe";  // a generator's name (schedule/generators.h)
  int microbatches = 8;               // per step
  int stages_per_rank = 0;            // interleaved-1f1b; 0: the schedule's default
  // A schedule from a file instead of `schedule` (the text form, or PyTorch's CSV for *.csv), e.g. one that
  // `dualpipe plan -f text -o FILE` wrote; its rank and micro-batch counts must be parallel.pp and microbatches.
  std::string schedule_file;
  // Overlapped forward-backward actions (DualPipe's) of MoE stages overlap one micro-batch's all-to-alls with the
  // other's compute; false: the forward, then the backward.
  bool fb_overlap = true;
  OverlapMode fb_overlap_mode = OverlapMode::Phases;
  bool recompute = false;  // activation recomputation (ExecutorOptions::recompute)
};

// The parallel sizes (pp: the pipeline ranks, --ranks) and how the replicas share their state.
struct ParallelismConfig : parallel::ParallelDims {
  ParallelismConfig() { pp = 4; }
  // ZeRO (--zero): the AdamW state sharded over the data-parallel replicas, then the gradients (each reduced to the
  // replica that owns it), then the parameters (gathered for a stage's actions of a step).
  ZeroStage zero = ZeroStage::None;
  bool dp_overlap = true;  // reduce a stage's gradients while the step goes on, once its last W is done
  // Sequence parallelism beside TP (Korthikanti et al. 2022): LayerNorms and the residual stream sharded along the
  // sequence, all-gather and reduce-scatter in place of TP's all-reduces, stage boundaries of seq_len / T tokens.
  bool sp = false;
};

// The model (models/gpt.h): a byte-level decoder-only transformer, with mixture-of-experts MLPs (models/moe.h)
// when experts > 0.
struct ModelConfig {
  int layers = 8;
  int64_t hidden = 128;
  int64_t heads = 4;
  int64_t seq_len = 64;                // tokens per training sequence
  std::vector<int> layers_per_stage;  // {3, 4, 4, 3}; empty: a balanced cut
  int64_t experts = 0;                 // per MoE layer; 0: dense MLPs
  int64_t top_k = 2;
  double capacity_factor = 1.25;
  double aux_loss = 0.01;  // the load-balancing loss's coefficient
};

// The data (data/): the user's files, or the default corpus when empty.
struct DataConfig {
  std::vector<std::string> files;
  int64_t batch = 2;  // sequences per micro-batch
  uint64_t seed = 0;  // the weights, the data order and the sample
};

// AdamW, linear warm-up then cosine decay to min_lr, clipping by the global gradient norm.
struct OptimizerConfig {
  int steps = 120;
  double lr = 6e-3;
  double min_lr = 6e-4;
  int warmup = 20;  // steps
  double weight_decay = 0.1;
  double beta1 = 0.9, beta2 = 0.95;
  double clip = 1.0;  // max global gradient norm; 0: no clipping
};

// Checkpoints (checkpoint.h).
struct CheckpointConfig {
  std::string dir;     // empty: none
  int save_every = 0;  // steps; 0: once, after the last step (when dir is set)
  int keep = 0;        // newest checkpoints kept; 0: all
  bool resume = false;
};

// What the run writes and prints: evaluations, the sample at the end, metrics and traces.
struct OutputsConfig {
  int eval_every = 40;  // also before the first step and after the last
  std::string prompt = "The ";
  int sample_tokens = 120;
  double temperature = 0.8;
  std::string metrics;                        // JSON lines; empty: none
  std::string trace = "dualpipe-trace.json";  // merged Chrome trace; empty: none
  std::string kineto_trace;                   // a directory for each rank's PyTorch profiler trace; empty: none
  int kineto_steps = 3;                       // steps it profiles, from step 2
  double act_bytes = 0;  // simulate's act_bytes, to print the planned peak in bytes; 0: not given
};

// Where the stages run, the transport between ranks (device_choice.h has the rules), and how long a rank waits.
struct DeviceConfig {
  DeviceKind kind = DeviceKind::Cpu;  // cuda: one GPU per local rank
  Backend backend = Backend::Auto;
  // An emulated device (device_emulation.h): the simulator's costs of each stage in milliseconds ("F=20,B=40,W=20,
  // a2a=20"), taken by sleeping instead of computing, and the link rate ("100mbit") that sizes a2a's exchanges.
  std::string emulate;
  std::string emulate_link_rate;
  double timeout_seconds = 60;
  // Stall reports (runtime/stall_watch.h): after this many seconds without progress inside a step, at most half
  // the timeout (0: only on SIGUSR1); each rank's state and the report go to stall_report_dir too (empty: none).
  double stall_report_after = 10;
  std::string stall_report_dir;

  // timeout_seconds as the wait limit every communicator takes.
  std::chrono::milliseconds timeout() const {
    return std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
  }
  // stall_report_after as a wait (0: off). check_options holds a given value to half the timeout; the default is cut
  // to it, and off where that is under a second (a healthy step's wait).
  std::chrono::milliseconds stall_after() const {
    const auto after =
        std::min(std::chrono::milliseconds(static_cast<int64_t>(stall_report_after * 1000)), timeout() / 2);
    return after < std::chrono::seconds(1) ? std::chrono::milliseconds(0) : after;
  }
};

// Stragglers (run/straggler.h): a pipeline rank whose compute per layer takes at least `threshold` times the median
// of the ranks running the same kind of action, for `steps` steps in a row, is named; with Replan, the run
// checkpoints, re-cuts the layers (and may change the schedule) for the measured speeds, restarts its ranks from the
// checkpoint and goes on.
struct StragglerConfig {
  double threshold = 1.15;
  int steps = 5;
  StragglerAction action = StragglerAction::Report;
  // The speeds the cut was made for ({1, 1, 0.67, 1}), which the detector takes as normal; empty: every rank at 1.
  std::vector<double> rank_speed;
  // "RANK=FACTOR[@STEP]": with device.emulate, pipeline rank RANK's emulated compute takes FACTOR times as long from
  // step STEP (1 without it), a straggler made on purpose.
  std::string emulate_slow_rank;
};

struct TrainConfig {
  PipelineConfig pipeline;
  ParallelismConfig parallel;
  ModelConfig model;
  DataConfig data;
  OptimizerConfig optimizer;
  CheckpointConfig checkpoint;
  OutputsConfig outputs;
  DeviceConfig device;
  StragglerConfig stragglers;

  // The processes of the job: P x D x C x T.
  int world_size() const { return static_cast<int>(parallel.world_size()); }
  // That product as options, for errors: "--pp 2 x --dp 2", with " x --cp C" and " x --tp T" when above 1.
  std::string world_product() const { return parallel::world_product(parallel, parallel::DimsSpelling::Options); }
};

// The overlap mode a run uses: --fb-overlap-mode, except that CUDA stages run Turns as Threads. Autograd runs a
// GPU backward on the device's own thread, which cannot take turns, so there the turns only serialised the halves:
// on an H200, DualPipe's step took 220.4 ms with turns, 220.9 ms without the overlap and 182.8 ms with the halves
// at once on their two streams (docs/gpu.md).
inline OverlapMode overlap_mode(const TrainConfig& c) {
  return c.pipeline.fb_overlap_mode == OverlapMode::Turns && c.device.kind == DeviceKind::Cuda
             ? OverlapMode::Threads
             : c.pipeline.fb_overlap_mode;
}

}  // namespace dualpipe::run
