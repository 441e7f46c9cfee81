#include "layout/pipeline_costs.h"

#include <algorithm>

#include "dualpipe/util/error.h"
#include "layout/collectives.h"
#include "layout/layer_time.h"

namespace dualpipe::layout {

namespace {

// What one layer adds to its stage, dense or MoE, as seconds of the stage's F, B and W and its parts; a stage adds
// each kind once per layer of it. Counted rather than looped, so that the time does not grow with the layers (a
// model may have 100000).
struct StageSums {
  double f = 0, b = 0, w = 0;                    // the simulator's costs, exposed communication included
  double compute = 0, recompute = 0, flops = 0;  // forward and backward compute; recomputed forwards; executed
  double tp = 0, cp = 0, tp_hidden = 0, cp_hidden = 0, all_to_all = 0;
  double dense_parameters = 0, expert_parameters = 0;

  void add(const StageSums& o, double count) {
    f += count * o.f, b += count * o.b, w += count * o.w;
    compute += count * o.compute, recompute += count * o.recompute, flops += count * o.flops;
    tp += count * o.tp, cp += count * o.cp, tp_hidden += count * o.tp_hidden, cp_hidden += count * o.cp_hidden;
    all_to_all += count * o.all_to_all;
    dense_parameters += count * o.dense_parameters, expert_parameters += count * o.expert_parameters;
  }
};

StageSums sums_of(const LayerTime& t, bool full_recompute) {
  StageSums s;
  // The backward exchanges as much as the forward, and a full recomputation runs the forward's exchanges again;
  // context parallelism's backward ring carries K, V and their gradients.
  const double tp = t.tp - t.tp_hidden, cp = t.cp - t.cp_hidden;
  const double tp_backward = tp * (full_recompute ? 2 : 1);
  s.f = t.forward + tp + cp;
  s.b = t.backward + t.recompute + tp_backward + 2 * cp;
  s.w = t.weight;
  s.compute = t.forward + t.backward, s.recompute = t.recompute;
  s.flops = 3 * t.forward_flops + t.recompute_flops;
  s.tp = tp + tp_backward, s.cp = 3 * cp;
  s.tp_hidden = t.tp_hidden * (full_recompute ? 3 : 2), s.cp_hidden = 3 * t.cp_hidden;
  return s;
}

}  // namespace

PipelineCosts pipeline_costs(const ModelSpec& model, const ClusterSpec& cluster, const Layout& layout,
                             bool overlapped_pairs) {
  const int stages = layout.stages(), t = layout.tp;
  DUALPIPE_REQUIRE(stages <= model.layers, "pp x vpp = ", stages,
                   " stages need at least as many layers, the model has ", model.layers);
  PipelineCosts out;
  // Contiguous cut, the first stages taking one layer more where the layers do not divide evenly.
  for (int s = 0; s < stages; ++s) out.layers_per_stage.push_back(model.layers / stages + (s < model.layers % stages));

  const double h = model.hidden, tokens = double(layout.micro_batch_size) * model.seq_len / layout.cp;
  const double act_bytes = tokens * h * model.dtype_bytes;  // a layer's input, one micro-batch, one cp rank
  const bool full = layout.recompute == Recompute::Full;
  // Expert parallelism: a dispatch and a combine per MoE layer each way.
  const double all_to_all_each_way =
      2 * all_to_all_seconds(cluster, layout.ep, act_bytes / t, model.top_k, model.max_nodes_per_token);

  const auto layer_sums = [&](bool moe) {
    StageSums s = sums_of(layer_time(model, cluster, layout, moe), full);
    s.all_to_all = moe ? 2 * all_to_all_each_way : 0;
    s.dense_parameters = (model.attention_parameters() +
                          (moe ? model.shared_experts * model.expert_parameters() + model.router_parameters()
                               : model.dense_ffn_parameters())) / t;
    s.expert_parameters = moe ? model.experts * model.expert_parameters() / layout.ep : 0;
    return s;
  };
  const StageSums dense_layer = layer_sums(false), moe_layer = model.experts > 0 ? layer_sums(true) : StageSums{};
  const StageSums output_layer = sums_of(output_layer_time(model, cluster, layout), false);

  std::vector<double> forward, backward, weight;
  double pair_sum = 0, separate_sum = 0;
  int layer = 0;
  for (int s = 0; s < stages; ++s) {
    StageSums stage;
    if (s == 0) stage.dense_parameters += double(model.vocab) * h / t;
    const int moe_layers = model.moe_layers_in(layer, layer + out.layers_per_stage[s]);
    layer += out.layers_per_stage[s];
    stage.add(dense_layer, out.layers_per_stage[s] - moe_layers);
    stage.add(moe_layer, moe_layers);
    if (s == stages - 1) {
      stage.add(output_layer, 1);
      if (!model.tied_embeddings || stages > 1) stage.dense_parameters += double(model.vocab) * h / t;
    }
    out.compute += stage.compute, out.recompute += stage.recompute, out.flops += stage.flops;
    out.tp += stage.tp, out.cp += stage.cp, out.tp_hidden += stage.tp_hidden, out.cp_hidden += stage.cp_hidden;
    // A pair runs one micro-batch's forward beside another's backward: their all-to-alls hide behind the compute.
    const double computing = stage.compute + stage.recompute;
    pair_sum += std::max(stage.f + stage.b, stage.all_to_all + stage.tp);
    separate_sum += stage.f + stage.b + stage.all_to_all;
    const double hidden = overlapped_pairs ? std::min(stage.all_to_all, computing) : 0;
    out.ep += stage.all_to_all - hidden, out.ep_hidden += hidden;
    forward.push_back(stage.f + stage.all_to_all / 2), backward.push_back(stage.b + stage.all_to_all / 2);
    weight.push_back(stage.w);
    out.parameters.push_back({stage.dense_parameters, stage.expert_parameters});
  }
  CostModel& costs = out.costs;
  costs.forward = costs.backward = costs.weight = 0;
  costs.stage_forward = forward, costs.stage_backward = backward, costs.stage_weight = weight;
  for (int s = 0; s < stages; ++s) {
    costs.forward += forward[s] / stages, costs.backward += backward[s] / stages, costs.weight += weight[s] / stages;
  }
  if (overlapped_pairs) costs.overlapped = (costs.forward + costs.backward) * pair_sum / separate_sum;
  // The pipeline's message: each tensor rank sends its 1/t of the activation (Megatron's scatter-gather).
  if (layout.pp > 1) {
    const GroupLink link = group_link(cluster, 2, t * layout.cp * layout.dp);
    costs.comm = link.step_seconds + act_bytes / t / link.bytes_per_second;
  }
  return out;
}

}  // namespace dualpipe::layout
