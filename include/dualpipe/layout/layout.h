// The layout planner: how to cut a training job over a cluster (tensor, context, pipeline, data and expert
// parallelism, ZeRO stage, recomputation, micro-batches and the pipeline schedule), each layout costed by the
// memory model (memory_model.h) and a time model whose pipeline part is the schedule simulator itself.
// docs/layout.md.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dualpipe/layout/cluster_spec.h"
#include "dualpipe/layout/memory_model.h"
#include "dualpipe/layout/model_spec.h"
#include "dualpipe/parallel/parallel_dims.h"
#include "dualpipe/schedule/schedule_limits.h"

namespace dualpipe::layout {

// The parallel sizes (tp, cp, pp, dp, ep) and their rules are parallel::ParallelDims', shared with the trainer.
struct Layout : parallel::ParallelDims {
  int vpp = 1;
  int zero = 1;
  Recompute recompute = Recompute::Selective;
  // A generator's name, "planned <the planner's name>" for the planner's automatic schedules, or "none" when pp = 1.
  std::string schedule = "none";
  int micro_batch_size = 1;
  int microbatches = 1;  // per step, per data-parallel replica
  // How the layers run, as the training software offers (--fix sp=0,dp_overlap=0,flash=0 for Megatron-LM in 2021):
  // with tp > 1, sequence parallelism splits the norms and dropouts over the tensor ranks too (Korthikanti et al.
  // 2022); the gradients' reduction runs behind the last backward (PyTorch DDP, Megatron-Core's
  // --overlap-grad-reduce); FlashAttention keeps attention's scores out of memory (Dao et al. 2022), where the
  // unfused softmax and dropout read and write them.
  bool sequence_parallel = true;
  bool dp_overlap = true;
  bool flash_attention = true;
  int stages() const { return pp * vpp; }
};

// Bytes per GPU at the peak: the model states, and the larger of the activations (during the backward) and the fp32
// copy of the gradients that the optimizer's step makes once they are freed (Megatron-LM's and DeepSpeed's
// mixed-precision optimizers cast the 16-bit gradients to fp32 beside the fp32 state: 4 bytes a parameter updated).
struct LayoutMemory {
  double parameters = 0, gradients = 0, optimizer = 0, activations = 0;
  double optimizer_step = 0;
  double states() const { return parameters + gradients + optimizer; }
  double total() const { return states() + std::max(activations, optimizer_step); }
};

// Seconds per step, by part, on the busiest rank: compute, the recomputed forwards, the communication left
// exposed, the pipeline's idle time (bubble, point-to-point waits included), the data-parallel reduction left
// exposed and the optimizer's update; they add up to `step`. The *_hidden parts ran behind compute and are not in
// the step.
struct LayoutTime {
  double compute = 0, recompute = 0, tp = 0, cp = 0, ep = 0, bubble = 0, dp = 0;
  double update = 0;  // the optimizer's step (update_ns_per_parameter, else its HBM traffic)
  double other = 0;   // what cluster.step_time_factor adds
  double step = 0;
  double tp_hidden = 0, cp_hidden = 0, ep_hidden = 0, dp_hidden = 0;
  double compute_efficiency = 0;  // FLOPs executed (recomputation included) over (compute + recompute) x peak
};

struct LayoutResult {
  Layout layout;
  LayoutMemory memory;
  double memory_limit = 0;  // bytes per GPU the planner may use
  bool fits = false;
  LayoutTime time;
  double peak_stage_activations = 0;  // the schedule's in-flight micro-batch stages on the worst rank
  double parameter_copies = 1;        // 2 for DualPipe and Chimera
  double tokens_per_second_per_gpu = 0;
  double tflops_per_gpu = 0;           // model FLOPs (no recomputation) per second per GPU
  double hardware_tflops_per_gpu = 0;  // FLOPs executed (recomputation included) per second per GPU
  double mfu = 0;
  double bubble_fraction = 0;  // time.bubble / time.step
  // For a schedule of the planner ("planned auto V"): the `dualpipe plan` command that writes it to plan.txt.
  std::string plan_command;
};

// Sizes a search is held to ("tp=8,pp=16,schedule=dualpipe"): any of tp, cp, pp, vpp, dp, ep, zero, mbs,
// recompute, schedule (one, or several joined by '+': those the training software offers, "none" for a pipeline of
// one stage), and how the layers run: sp, dp_overlap, flash (0 or 1; 1 unless fixed). even_stages=1 keeps only
// pipelines whose stages hold the same number of layers (Megatron-LM before 2024 requires it; the planner
// otherwise cuts unevenly, the first stages taking one layer more).
struct LayoutFix {
  std::optional<int> tp, cp, pp, vpp, dp, ep, zero, mbs;
  std::optional<Recompute> recompute;
  std::vector<std::string> schedules;  // empty: any
  bool allows_schedule(const std::string& kind) const;
  std::optional<bool> sp, dp_overlap, flash, even_stages;
  void apply(Layout& layout) const;  // sets sp, dp_overlap and flash where fixed
  static LayoutFix parse(const std::string& text);  // throws InvalidArgument naming the item and the rule
  std::string to_string() const;                    // as parse() reads it
  bool holds(const Layout& layout) const;           // every fixed value is the layout's
  bool cuts_as_required(const ModelSpec& model, const Layout& layout) const;  // even_stages, where fixed
  // Throws InvalidArgument when no layout of `model` could hold the values together, naming the ones in conflict
  // and the rule (ep on a dense model, vpp against the fixed schedule's stages per rank, pp=1 with a schedule).
  void check_can_hold(const ModelSpec& model) const;
};

// A search may generate schedules of this many times its memory limit in all (LayoutRequest::max_memory_bytes).
// Its time grows with their sum, about 0.2 s per GiB of it on this project's 2-core machine (DeepSeek-V3 on 2048
// GPUs, 12 GiB with combined 1F1B: 2.1 s), so 12 GiB keeps the default search within its 5-second goal
// (docs/limits.md).
constexpr double kSearchBytesPerLimit = 12;

struct LayoutRequest {
  ModelSpec model;
  ClusterSpec cluster;
  int global_batch = 0;  // sequences per step
  LayoutFix fix;
  int top = 10;
  bool include_unfit = false;  // rank layouts over the memory limit too (marked fits = false)
  bool planner = true;         // add the schedule planner's automatic schedules for the best pipelines
  // The memory one pipeline schedule may take to generate (estimate_schedule_bytes), as the other planners'
  // --max-memory; a search may generate kSearchBytesPerLimit times it in all. Checked before any is generated.
  std::int64_t max_memory_bytes = kDefaultMaxScheduleMemory;
};

struct LayoutSearch {
  std::vector<LayoutResult> ranked;  // best tokens/s per GPU first
  long long layouts = 0;             // layouts that divide
  long long over_memory = 0;         // of them, refused by the memory model
  long long simulated = 0;           // pipelines simulated (the rest were bounded out)
  long long schedules = 0;           // distinct pipeline schedules the layouts need, each generated once
  double schedule_bytes = 0;         // their estimated memory together (estimate_schedule_bytes), checked first
};

// Model FLOPs per token, forward and backward (PaLM's 6N + 12·L·h·s: N the parameters a token passes through in
// matrix products, attention's scores and values counted in full).
double model_flops_per_token(const ModelSpec& model);
// The same with the forwards that `recompute` runs again: the layers' forward a second time under full
// recomputation (Narayanan et al. 2021's 96·B·s·l·h² count for a GPT), the attention core under selective
// without FlashAttention (with it, the scores are never kept, so there is nothing to recompute).
double executed_flops_per_token(const ModelSpec& model, Recompute recompute, bool flash_attention);

// Costs one layout; throws InvalidArgument when it does not divide (naming the sizes and the rule).
LayoutResult evaluate_layout(const ModelSpec& model, const ClusterSpec& cluster, int global_batch,
                             const Layout& layout);

// Every layout that divides, best first; the pipeline of a layout is simulated only when its compute alone could
// put it among the top. Throws InvalidArgument for bad input or when no layout divides.
LayoutSearch search_layouts(const LayoutRequest& request);

}  // namespace dualpipe::layout
