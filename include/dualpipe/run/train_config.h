// Everything one training run is made of, as plain values: the command line of `dualpipe train` maps onto it
// one to one (run/train_options.h), a C++ user fills it in directly (as train::TrainConfig), and `dualpipe layout`
// fills it for the layouts it plans. LibTorch-free.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace dualpipe::run {

struct TrainConfig {
  // The pipeline.
  std::string schedule = "dualpipe";
  int ranks = 4;          // pipeline ranks P (processes per pipeline replica)
  int dp = 1;             // data-parallel replicas D of the pipeline: P x D processes in all
  bool dp_overlap = true;  // reduce a stage's gradients while the step goes on, once its last W is done
  // The ZeRO stage (--zero; --zero1 is its old spelling of 1): 0 none, 1 the AdamW state sharded over the data-parallel
  // replicas, 2 the gradients too (each reduced to the replica that owns it), 3 the parameters too (gathered for a
  // stage's actions of a step).
  int zero = 0;
  int ep = 1;             // expert-parallel group size E among the replicas (divides dp)
  // Tensor-parallel ranks T of every stage (Megatron's: attention by heads, the MLP by columns then rows, the
  // embedding and the head by vocabulary): P x D x T processes in all.
  int tp = 1;
  // Sequence parallelism beside TP (Korthikanti et al. 2022): LayerNorms and the residual stream sharded along the
  // sequence, all-gather and reduce-scatter in place of TP's all-reduces, stage boundaries of seq_len / T tokens.
  bool sp = false;
  // Context-parallel ranks C of every stage: each sequence cut into 2C chunks, rank c holding chunks c and 2C-1-c,
  // attention run as a ring over them (parallel/context_parallel.h): P x D x C x T processes in all.
  int cp = 1;
  // Overlapped forward-backward actions (DualPipe's) of MoE stages overlap one micro-batch's all-to-alls with the
  // other's compute; false: the forward, then the backward.
  bool fb_overlap = true;
  // With fb_overlap, how the halves share the rank (kOverlapModes): "phases", interleaved phase by phase on one
  // thread, each exchange waited for where its result is first used (runtime/phases.h); "threads", the backward on a
  // second thread, both computing at once; "turns", two threads taking turns at each all-to-all (CPU stages only:
  // overlap_mode below).
  std::string fb_overlap_mode = "phases";
  int microbatches = 8;   // per step
  int stages_per_rank = 0;  // interleaved-1f1b; 0: the schedule's default
  // A schedule from a file instead of `schedule` (the text form, or PyTorch's CSV for *.csv), e.g. one that
  // `dualpipe plan -f text -o FILE` wrote; its rank and micro-batch counts must be `ranks` and `microbatches`.
  std::string schedule_file;

  // The model (models/gpt.h): a byte-level decoder-only transformer.
  int layers = 8;
  int64_t hidden = 128;
  int64_t heads = 4;
  int64_t seq_len = 64;          // tokens per training sequence
  std::string layers_per_stage;  // "3,4,4,3"; empty: a balanced cut
  // Mixture of experts (models/moe.h): experts per MoE layer, 0 for dense MLPs.
  int64_t experts = 0;
  int64_t top_k = 2;
  double capacity_factor = 1.25;
  double aux_loss = 0.01;  // the load-balancing loss's coefficient

  // The data (data/): the user's files, or the default corpus when empty.
  std::vector<std::string> data;
  int64_t batch = 2;  // sequences per micro-batch

  // The optimizer: AdamW, linear warm-up then cosine decay to min_lr, clipping by the global gradient norm.
  int steps = 120;
  double lr = 6e-3;
  double min_lr = 6e-4;
  int warmup = 20;  // steps
  double weight_decay = 0.1;
  double beta1 = 0.9, beta2 = 0.95;
  double clip = 1.0;  // max global gradient norm; 0: no clipping
  uint64_t seed = 0;  // weights, data order, sampling

  // Evaluation and the sample printed at the end.
  int eval_every = 40;  // also before the first step and after the last
  std::string prompt = "The ";
  int sample_tokens = 120;
  double temperature = 0.8;

  // Outputs.
  std::string metrics;                        // JSON lines; empty: none
  std::string trace = "dualpipe-trace.json";  // merged Chrome trace; empty: none
  std::string kineto_trace;                   // a directory for each rank's PyTorch profiler trace; empty: none
  int kineto_steps = 3;                       // steps it profiles, from step 2
  double act_bytes = 0;  // simulate's act_bytes, to print the planned peak in bytes; 0: not given

  // Checkpoints (checkpoint.h).
  std::string checkpoint_dir;  // empty: none
  int save_every = 0;          // steps; 0: once, after the last step (when checkpoint_dir is set)
  int keep = 0;                // newest checkpoints kept; 0: all
  bool resume = false;

  bool recompute = false;  // activation recomputation (ExecutorOptions::recompute)
  double timeout_seconds = 60;
  // Stall reports (runtime/stall_watch.h): after this many seconds without progress inside a step, at most half
  // the timeout (0: only on SIGUSR1); each rank's state and the report go to stall_report_dir too (empty: none).
  double stall_report_after = 10;
  std::string stall_report_dir;

  // Where the stages run, and the transport between ranks (device_choice.h has the rules).
  std::string device = "cpu";  // "cpu" or "cuda" (one GPU per local rank)
  std::string backend;         // "gloo" or "nccl"; empty: nccl for cuda, gloo for cpu
  // An emulated device (device_emulation.h): the simulator's costs of each stage in milliseconds ("F=20,B=40,W=20,
  // a2a=20"), taken by sleeping instead of computing, and the link rate ("100mbit") that sizes a2a's exchanges.
  std::string emulate_device;
  std::string emulate_link_rate;
  // "RANK=FACTOR[@STEP]": with emulate_device, pipeline rank RANK's emulated compute takes FACTOR times as long from
  // step STEP (1 without it), a straggler made on purpose (run/straggler.h).
  std::string emulate_slow_rank;

  // Stragglers (run/straggler.h): a pipeline rank whose compute per layer takes at least straggler_threshold times
  // the median of the ranks running the same kind of action, for straggler_steps steps in a row, is named; with
  // "replan", the run checkpoints, re-cuts the layers (and may change the schedule) for the measured speeds,
  // restarts its ranks from the checkpoint and goes on. rank_speed: the speeds the cut was made for ("1,1,0.67,1"),
  // which the detector takes as normal; empty: every rank at 1.
  double straggler_threshold = 1.15;
  int straggler_steps = 5;
  std::string on_straggler = "report";
  std::string rank_speed;

  // The processes of the job: P x D x C x T.
  int world_size() const { return ranks * dp * cp * tp; }
  // That product as options, for errors: "--pp 2 x --dp 2", with " x --cp C" and " x --tp T" when above 1.
  std::string world_product() const {
    return "--pp " + std::to_string(ranks) + " x --dp " + std::to_string(dp) +
           (cp > 1 ? " x --cp " + std::to_string(cp) : "") + (tp > 1 ? " x --tp " + std::to_string(tp) : "");
  }

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

inline constexpr const char* kOverlapModes[] = {"phases", "threads", "turns"};

// The overlap mode a run uses: --fb-overlap-mode, except that CUDA stages run "turns" as "threads". Autograd runs a
// GPU backward on the device's own thread, which cannot take turns, so there the turns only serialised the halves:
// on an H200, DualPipe's step took 220.4 ms with turns, 220.9 ms without the overlap and 182.8 ms with the halves
// at once on their two streams (docs/gpu.md).
inline std::string overlap_mode(const TrainConfig& c) {
  return c.fb_overlap_mode == "turns" && c.device == "cuda" ? "threads" : c.fb_overlap_mode;
}

}  // namespace dualpipe::run
