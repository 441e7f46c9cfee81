#include "stage_traffic.h"

#include <atomic>
#include <cstdio>
#include <set>
#include <utility>
#include <vector>

#include "dualpipe/models/moe.h"
#include "dualpipe/schedule/zero_stage.h"

namespace dualpipe::train {

namespace {

// The (stage, micro-batch) pairs of each stage that `pipeline_rank` runs.
std::vector<int> microbatches_per_stage(const Schedule& schedule, int pipeline_rank) {
  std::vector<int> counts(static_cast<size_t>(schedule.num_stages), 0);
  for (int stage = 0; stage < schedule.num_stages; ++stage)
    for (int m = 0; m < schedule.num_microbatches; ++m) counts[stage] += schedule.placement.rank(stage, m) == pipeline_rank;
  return counts;
}

// The MoE layers' all-gather of a micro-batch's expert choices and probability sums (8 bytes each) over the
// `ranks` a sequence is split over, per forward of a stage of `layers` MoE blocks: each rank's part of a ring.
double routing_gather_bytes(const TrainConfig& c, int ranks, int layers) {
  if (c.model.experts == 0 || ranks == 1) return 0;
  const double tokens = double(c.data.batch) * c.model.seq_len / (c.parallel.cp * (c.parallel.sp ? c.parallel.tp : 1));  // this rank's, per micro-batch
  return layers * double(ranks - 1) * (tokens * c.model.top_k + c.model.experts) * 8;
}

double predicted_tensor_bytes(const TrainConfig& c, const RunPlan& plan, int pipeline_rank, int tensor_ranks) {
  const double share = double(tensor_ranks - 1) / tensor_ranks, h = double(c.model.hidden), s = double(c.model.seq_len / c.parallel.cp);
  const double n = double(c.data.batch) * s * h * 4;  // bytes of one micro-batch's hidden states (this rank's tokens)
  const Schedule& schedule = plan.schedule;
  const std::vector<int> runs = microbatches_per_stage(schedule, pipeline_rank);
  double bytes = 0;
  for (int stage = 0; stage < schedule.num_stages; ++stage) {
    const int microbatches = runs[stage];
    if (microbatches == 0) continue;
    const bool first = stage == 0, last = stage == schedule.num_stages - 1;
    const int layers = plan.cut.layers_per_stage[static_cast<size_t>(stage)];
    const int split_parts = c.model.experts > 0 ? 1 : 2;  // attention, and a dense MLP (MoE layers are not split)
    // Each split part's forward and backward each reduce a micro-batch's hidden states once; the embedding's
    // forward once; the head's backward once, and the cross entropy's forward its max, sum and target logit.
    const double forward = layers * split_parts * 2 * share * n + (first ? 2 * share * n : 0) +
                           (last ? 2 * share * double(c.data.batch) * s * 3 * 4 : 0);
    const double backward = layers * split_parts * 2 * share * n + (last ? 2 * share * n : 0);
    const double routing = c.parallel.sp ? routing_gather_bytes(c, tensor_ranks, layers) : 0;
    // Recomputation runs the forward (and the loss) again before the backward.
    bytes += microbatches * ((forward + routing) * (c.pipeline.recompute ? 2 : 1) + backward);
    if (c.parallel.sp) {
      // Per block the LayerNorms and the row-parallel biases; an MoE block's router and local experts instead of
      // fc2's bias (each rank's tokens give them a part of their gradients).
      const double local_experts = c.model.experts > 0 ? double(c.model.experts / c.parallel.ep) : 0;
      const double block = c.model.experts > 0 ? 5 * h + h * c.model.experts + local_experts * (8 * h * h + 5 * h) : 6 * h;
      const double whole_parameters = layers * block + (first ? double(c.model.seq_len) * h : 0) + (last ? 2 * h : 0);
      bytes += 2 * share * whole_parameters * 4;
    }
  }
  return bytes;
}

double predicted_context_bytes(const TrainConfig& c, const RunPlan& plan, int pipeline_rank, int context_ranks) {
  const double block = double(c.data.batch) * (c.model.seq_len / context_ranks) * 2.0 * (c.model.hidden / c.parallel.tp) * 4;  // K and V
  const std::vector<int> runs = microbatches_per_stage(plan.schedule, pipeline_rank);
  double bytes = 0;
  for (int stage = 0; stage < plan.schedule.num_stages; ++stage) {
    const int layers = plan.cut.layers_per_stage[static_cast<size_t>(stage)];
    bytes += runs[stage] * (layers * (context_ranks - 1) * block * (c.pipeline.recompute ? 3 : 2) +
                            routing_gather_bytes(c, context_ranks, layers) * (c.pipeline.recompute ? 2 : 1));
  }
  return bytes;
}

// The distinct pipeline ranks holding `stage`: two for the stages DualPipe and Chimera keep a copy of.
int holders(const Schedule& schedule, int stage) {
  std::set<int> ranks;
  for (int m = 0; m < schedule.num_microbatches; ++m) ranks.insert(schedule.placement.rank(stage, m));
  return static_cast<int>(ranks.size());
}

// One step's data-parallel bytes for this rank's `stages` (stage_traffic.h).
double predicted_data_parallel_bytes(const TrainConfig& c, const Schedule& schedule,
                                     const std::map<int, StageState>& stages, bool copies_joined) {
  const ZeroStage zero = c.parallel.zero;
  double bytes = 0;
  for (const auto& [stage, state] : stages) {
    double dense = 0, experts = 0;  // Ψ of the data-parallel group, and of the expert-data-parallel group
    for (const auto& p : state.module->named_parameters())
      if (p.value().requires_grad())
        (c.parallel.ep > 1 && models::is_expert_parameter(p.key()) ? experts : dense) += double(p.value().nbytes());
    const int copies = copies_joined ? holders(schedule, stage) : 1;
    for (const auto& [psi, members] : {std::pair{dense, c.parallel.dp}, std::pair{experts, c.parallel.dp / c.parallel.ep}}) {
      const double share = double(members - 1) / members, reduced = copies * members;
      const double all_reduce = 2 * (reduced - 1) / reduced * psi;
      const bool reduced_to_owners = shards_gradients(zero) && copies == 1;
      const bool shared_out = shards_optimizer_state(zero);  // the owners' updates broadcast, or ZeRO-3's gathers
      bytes += reduced_to_owners ? 2 * share * psi : all_reduce + (shared_out ? share * psi : 0);
    }
  }
  return bytes;
}

std::string line(const char* what, double counted, double predicted) {
  char text[200];
  std::snprintf(text, sizeof text, "%s traffic per training step, this rank: %.3f MiB sent (ring), predicted %.3f MiB",
                what, counted / (1 << 20), predicted / (1 << 20));
  return text;
}

}  // namespace

StageTraffic::StageTraffic(const TrainConfig& c, const RunPlan& plan, int pipeline_rank, models::TensorGroup tp,
                           models::ContextGroup cp, const std::map<int, StageState>& stages,
                           std::shared_ptr<const parallel::DataParallelTraffic> data_parallel, bool copies_joined)
    : tp_(std::move(tp)), cp_(std::move(cp)), data_parallel_(std::move(data_parallel)) {
  data_.predicted = predicted_data_parallel_bytes(c, plan.schedule, stages, copies_joined);
  if (data_parallel_ && data_.predicted > 0) data_.sent = &data_parallel_->sent;
  if (tp_ && tp_->size() > 1) {
    tensor_.sent = &tp_->ring_bytes_sent;
    tensor_.predicted = predicted_tensor_bytes(c, plan, pipeline_rank, tp_->size());
  }
  if (parallel::splits_context(cp_)) {
    context_.sent = &cp_->ring_bytes_sent;
    context_.predicted = predicted_context_bytes(c, plan, pipeline_rank, cp_->size());
  }
}

void StageTraffic::step_started() {
  for (Counted* group : {&tensor_, &context_, &data_})
    if (group->sent) group->at_step_start = *group->sent;
}

void StageTraffic::updates_finished() {
  if (!data_.sent) return;
  data_.counted += *data_.sent - data_.at_step_start;
  ++update_steps_;
}

void StageTraffic::step_finished() {
  for (Counted* group : {&tensor_, &context_})
    if (group->sent) group->counted += *group->sent - group->at_step_start;
  ++steps_;
}

std::string StageTraffic::describe() const {
  if (steps_ == 0) return "";
  std::string text;
  if (tensor_.sent) text += line("tensor-parallel", double(tensor_.counted) / steps_, tensor_.predicted);
  if (context_.sent)
    text += (text.empty() ? "" : "\n") + line("context-parallel", double(context_.counted) / steps_, context_.predicted);
  if (data_.sent && update_steps_ > 0)
    text += (text.empty() ? "" : "\n") + line("data-parallel", double(data_.counted) / update_steps_,
                                               data_.predicted);
  return text;
}

}  // namespace dualpipe::train
