#include "layout/pipeline_costs.h"

#include <algorithm>

#include "dualpipe/util/error.h"

namespace dualpipe::layout {

double group_bandwidth(const ClusterSpec& cluster, int size, int stride) {
  const bool in_node = double(size) * stride <= cluster.gpus_per_node;
  return (in_node ? cluster.intra_node_gbps : cluster.inter_node_gbps) * 1e9 * cluster.link_efficiency;
}

namespace {

// An all-to-all over `ep` ranks numbered node by node, moving `token_bytes` per token to each of its `copies`
// experts: the share of the traffic that leaves its node goes over the network while the rest takes NVLink, at
// once. With node-limited routing (max_nodes > 0), a token crosses the network once per remote node it reaches,
// at most max_nodes of them, and every copy then takes NVLink once inside its node.
double all_to_all_seconds(const ClusterSpec& cluster, int ep, double token_bytes, int copies, int max_nodes) {
  const double bytes = token_bytes * copies, moved = bytes * (ep - 1) / ep;
  const double eff = cluster.link_efficiency * 1e9;
  if (ep <= cluster.gpus_per_node) return moved / (cluster.intra_node_gbps * eff);
  const double outside = double(ep - cluster.gpus_per_node) / (ep - 1);
  double network = moved * outside, nvlink = moved * (1 - outside);
  if (max_nodes > 0) {
    const double nodes = double(ep) / cluster.gpus_per_node;
    network = std::min(network, token_bytes * std::min(max_nodes, copies) * (nodes - 1) / nodes);
    nvlink = moved;
  }
  return std::max(network / (cluster.inter_node_gbps * eff), nvlink / (cluster.intra_node_gbps * eff));
}

}  // namespace

PipelineCosts pipeline_costs(const ModelSpec& model, const ClusterSpec& cluster, const Layout& layout,
                             bool overlapped_pairs) {
  const int stages = layout.stages(), t = layout.tp, c = layout.cp;
  DUALPIPE_REQUIRE(stages <= model.layers, "pp x vpp = ", stages, " stages need at least as many layers, the model has ",
                   model.layers);
  PipelineCosts out;
  // Contiguous cut, the first stages taking one layer more where the layers do not divide evenly.
  for (int s = 0; s < stages; ++s) out.layers_per_stage.push_back(model.layers / stages + (s < model.layers % stages));

  const double h = model.hidden, seq = model.seq_len, tokens = double(layout.micro_batch_size) * seq;
  const double rate = cluster.peak_tflops * 1e12 * cluster.matmul_efficiency * t * c;  // FLOP/s of a tp x cp group
  const double act_bytes = tokens / c * h * model.dtype_bytes;  // a layer's input, one micro-batch, one cp rank
  const double tp_bw = group_bandwidth(cluster, t, 1), cp_bw = group_bandwidth(cluster, c, t);
  const double kv_share = double(model.kv_heads > 0 ? model.kv_heads : model.heads) / model.heads;
  // Sequence parallelism: 2 all-gathers and 2 reduce-scatters per layer each way, each moving (t-1)/t of it.
  const double tp_each_way = t > 1 ? 4.0 * (t - 1) / t * act_bytes / tp_bw : 0;
  // Ring attention: cp - 1 exchanges of this rank's K and V forward, twice that (with their gradients) backward,
  // overlapped with the attention's own compute.
  const double cp_forward = c > 1 ? (c - 1) * 2 * act_bytes * kv_share / t / cp_bw : 0;
  const double ep_each_way =
      layout.ep > 1
          ? 2 * all_to_all_seconds(cluster, layout.ep, act_bytes / t, model.top_k, model.max_nodes_per_token)
          : 0;

  // What one layer adds to its stage, dense or MoE; a stage adds each kind once per layer of it. Counted rather
  // than looped, so that the time does not grow with the layers (a model may have 100000).
  struct LayerCosts {
    double f_compute = 0, b_compute = 0, w = 0, cp_f = 0, cp_b = 0, exposed_tp = 0, all_to_all = 0;
    double dense_parameters = 0, expert_parameters = 0;
  };
  const auto layer_costs = [&](bool moe) {
    LayerCosts l;
    const double ffn = moe ? (model.top_k + model.shared_experts) * model.expert_parameters() + model.router_parameters()
                           : model.dense_ffn_parameters();
    const double attention_core = tokens * 4 * h * seq / rate;  // QK^T and AV, forward
    const double fc = tokens * 2 * (model.attention_parameters() + ffn) / rate + attention_core;
    double bc = 2 * fc;
    if (layout.recompute == Recompute::Full) bc += fc;
    if (layout.recompute == Recompute::Selective) bc += attention_core;
    l.f_compute = fc, l.b_compute = bc, l.w = fc;
    l.cp_f = std::max(0.0, cp_forward - attention_core), l.cp_b = std::max(0.0, 2 * (cp_forward - attention_core));
    l.exposed_tp = 2 * tp_each_way;
    l.all_to_all = moe ? 2 * ep_each_way : 0;
    l.dense_parameters = (model.attention_parameters() +
                          (moe ? model.shared_experts * model.expert_parameters() + model.router_parameters()
                               : model.dense_ffn_parameters())) / t;
    l.expert_parameters = moe ? model.experts * model.expert_parameters() / layout.ep : 0;
    return l;
  };
  const LayerCosts dense_layer = layer_costs(false), moe_layer = layer_costs(true);

  std::vector<double> forward, backward, weight;
  double pair_sum = 0, separate_sum = 0;
  int layer = 0;
  for (int s = 0; s < stages; ++s) {
    double w = 0, f_compute = 0, b_compute = 0, all_to_all = 0, exposed_tp = 0, cp_f = 0, cp_b = 0;
    StageParameters params;
    if (s == 0) params.dense += double(model.vocab) * h / t;
    const int moe_layers = model.moe_layers_in(layer, layer + out.layers_per_stage[s]);
    layer += out.layers_per_stage[s];
    for (const auto& [l, count] : {std::pair{dense_layer, out.layers_per_stage[s] - moe_layers},
                                   std::pair{moe_layer, moe_layers}}) {
      f_compute += count * l.f_compute, b_compute += count * l.b_compute, w += count * l.w;
      cp_f += count * l.cp_f, cp_b += count * l.cp_b, exposed_tp += count * l.exposed_tp;
      all_to_all += count * l.all_to_all;
      params.dense += count * l.dense_parameters, params.experts += count * l.expert_parameters;
    }
    if (s == stages - 1) {
      const double logits = tokens * 2 * double(model.vocab) * h / rate;
      f_compute += logits, b_compute += 2 * logits, w += logits;
      if (!model.tied_embeddings || stages > 1) params.dense += double(model.vocab) * h / t;
    }
    const double f = f_compute + exposed_tp / 2 + cp_f, b = b_compute + exposed_tp / 2 + cp_b;
    out.compute += f_compute + b_compute, out.tp += exposed_tp, out.cp += cp_f + cp_b;
    // A pair runs one micro-batch's forward beside another's backward: their all-to-alls hide behind the compute.
    const double separate = f + b + all_to_all;
    pair_sum += std::max(f + b, all_to_all + exposed_tp), separate_sum += separate;
    out.ep += overlapped_pairs ? std::max(0.0, all_to_all - (f_compute + b_compute)) : all_to_all;
    forward.push_back(f + all_to_all / 2), backward.push_back(b + all_to_all / 2), weight.push_back(w);
    out.parameters.push_back(params);
  }
  CostModel& costs = out.costs;
  costs.forward = costs.backward = costs.weight = 0;
  costs.stage_forward = forward, costs.stage_backward = backward, costs.stage_weight = weight;
  for (int s = 0; s < stages; ++s) {
    costs.forward += forward[s] / stages, costs.backward += backward[s] / stages, costs.weight += weight[s] / stages;
  }
  if (overlapped_pairs) costs.overlapped = (costs.forward + costs.backward) * pair_sum / separate_sum;
  costs.comm = layout.pp > 1 ? act_bytes / t / group_bandwidth(cluster, 2, t * c * layout.dp) : 0;
  return out;
}

}  // namespace dualpipe::layout
