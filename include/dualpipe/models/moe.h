// A mixture-of-experts MLP (GShard / Switch Transformer style) for the transformer's blocks: a top-k router over
// N experts, a fixed capacity per expert with dropped-token accounting, and the auxiliary load-balancing loss.
//
// Routing, capacity and the auxiliary loss are computed per micro-batch from its own tokens only, so a token's
// fate never depends on what other replicas or micro-batches hold: a run with experts sharded over an EP group
// computes what one process holding every expert computes. Where a micro-batch's sequences are split over ranks
// (SequenceSplit: context parallelism, or sequence parallelism beside tensor parallelism), the ranks first share
// their tokens' choices (a small all-gather of expert indices and probability sums) and each keeps its own tokens'
// places in the whole micro-batch's queues: the capacity, the dropped choices, the slots and the auxiliary loss are
// one process's.
//
// Forward, for the T tokens of a micro-batch:
//   1. router: softmax(x W_r) over the N experts, the top k per token, gates renormalised to sum to 1;
//   2. capacity C = ceil(capacity_factor * T * k / N) slots per expert; assignments take slots in order of
//      choice (every token's first choice before any second choice), then token. An assignment past its expert's
//      capacity is dropped: the token gets nothing from that expert (it still has the residual stream);
//   3. dispatch: the tokens copied into an [N * C, hidden] buffer of slots, exchanged with the EP group
//      (expert_all_to_all.h), so each rank holds the slots of its N/E experts from every rank of the group;
//   4. each local expert (a GELU MLP) runs on each source rank's C slots (the same shapes as in one process);
//   5. combine: the results exchanged back, and each token's kept results summed, weighted by their gates.
// The auxiliary loss N * sum_e f_e * P_e (f_e: the fraction of the k*T choices that chose e; P_e: the mean router
// probability of e) enters the backward with the weight `aux_loss_weight`, without changing the output.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dualpipe/parallel/expert_all_to_all.h"
#include "dualpipe/runtime/backward_segments.h"

namespace dualpipe::models {

// An emulated device (dualpipe train --emulate-device): each MoE layer's compute takes set times without using
// the host, as on a GPU, and its exchanges carry set sizes, so a schedule's timing is measured rather than the
// host's cores (emulated_compute.h). The layer's real maths still runs (a small model's, in far less time), so
// the results are those of the layer without emulation, bit for bit. Zero everywhere: no emulation.
// This process's emulated device computes `factor` times as slowly from now on (1: as its costs say):
// `dualpipe train --emulate-slow-rank`, a straggler made on purpose.
void set_emulated_slowdown(double factor);

struct EmulatedLayer {
  int64_t forward_us = 0;       // the layer's forward: half before the dispatch, half between dispatch and combine
  int64_t input_grad_us = 0;    // its input gradient (I), split the same way between its exchanges
  int64_t weight_grad_us = 0;   // its parameter gradient (W)
  int64_t exchange_bytes = 0;   // bytes each exchange sends off the rank, at least (padded with zeros)

  bool on() const { return forward_us > 0 || input_grad_us > 0 || weight_grad_us > 0 || exchange_bytes > 0; }
};

struct MoeConfig {
  int64_t experts = 0;  // N; 0: a dense MLP
  int64_t top_k = 2;
  double capacity_factor = 1.25;
  // The gradient weight of each micro-batch's auxiliary loss: the coefficient (--aux-loss) divided by the
  // micro-batches of a step, as each micro-batch's language-model loss is.
  double aux_loss_weight = 0.01;
  EmulatedLayer emulated;  // set per stage by GptStage from GptConfig::emulated_stages

  // Throws InvalidArgument naming the option (--experts, --top-k, --capacity-factor, --aux-loss) and the rule.
  void check() const;
};

// A micro-batch's sequences split over a group of ranks, each holding some positions of every sequence: context
// parallelism's zig-zag chunks over the context group, or sequence parallelism's contiguous ones over the tensor
// group.
struct SequenceSplit {
  int size = 1, rank = 0;
  // Every rank's `x` (one shape on each), stacked in rank order [size, ...], outside autograd.
  std::function<torch::Tensor(const torch::Tensor& x)> gather;
  // The positions rank `r`'s tokens take in a sequence of `tokens`, in the order the rank holds them.
  std::function<torch::Tensor(int64_t tokens, int r, c10::Device device)> positions;
};

// What the layer saw since the last reset: routed choices, those dropped for capacity, the auxiliary losses.
struct MoeStats {
  int64_t choices = 0;
  int64_t dropped = 0;
  double aux_loss_sum = 0;
  int64_t aux_losses = 0;  // micro-batches x layers

  void add(const MoeStats& other);
  double dropped_fraction() const { return choices ? double(dropped) / double(choices) : 0.0; }
  double mean_aux_loss() const { return aux_losses ? aux_loss_sum / double(aux_losses) : 0.0; }
};

// True for the parameters of an expert ("block3.moe.expert5.fc1.weight"): they live on one rank of each EP
// group, and their gradients are reduced over the expert-data-parallel group instead of the data-parallel one.
bool is_expert_parameter(const std::string& name);

// Where a backward run as phases (runtime/phases.h) cuts one layer's graph (runtime/backward_segments.h): both ends
// of each exchange, and what the layer's first phase hands its last (the gates, and the auxiliary loss if it has
// one), each through a node of its own so that the cut is clean.
struct MoePoints {
  runtime::GraphPoint dispatch_sent, dispatch_received, combine_sent, combine_received;
  std::vector<runtime::GraphPoint> handed;
  const parallel::ExpertCommunication* group = nullptr;  // what the exchanges ran over (the layer's)
};

// One micro-batch's forward of a layer between its phases (MoeLayerImpl::start_dispatch).
struct MoeInFlight;

class MoeLayerImpl : public torch::nn::Module {
 public:
  // The experts of rank r of an EP group of E are r*N/E .. (r+1)*N/E - 1, named by their global index and drawn
  // from (seed, layer, expert), so a shard holds exactly the weights of those experts in a one-process model.
  // `communication`: the EP group; null or a group of one holds every expert. `split`: how the micro-batch's
  // sequences are split over ranks (null: each rank holds whole sequences).
  MoeLayerImpl(const MoeConfig& config, int64_t hidden, uint64_t seed, int layer, int layers,
               std::shared_ptr<const parallel::ExpertCommunication> communication,
               std::shared_ptr<const SequenceSplit> split = nullptr);
  // x: [rows, tokens, hidden] -> the same shape.
  torch::Tensor forward(const torch::Tensor& x);

  // forward() in three phases, each exchange waited for where its result is first used:
  // routing and the dispatch's start; the experts (once the dispatch has ended) and the combine's start; the
  // combine's sum (once it has ended), which returns what forward() does.
  std::shared_ptr<MoeInFlight> start_dispatch(const torch::Tensor& x);
  void start_combine(MoeInFlight& layer);
  torch::Tensor finish_combine(MoeInFlight& layer);
  static MoePoints points(const MoeInFlight& layer);
  // The EP group its exchanges run over (a group of one when it has none).
  const parallel::ExpertCommunication& communication() const;

  const MoeStats& stats() const { return stats_; }
  void reset_stats() { stats_ = MoeStats(); }

 private:
  struct Routing;
  // tokens: [rows x tokens, hidden], `rows` sequences' tokens (this rank's, under context parallelism).
  Routing route(const torch::Tensor& tokens, int64_t rows);
  struct WholeMicrobatch;
  WholeMicrobatch gather_split(int64_t rows, const torch::Tensor& expert, const torch::Tensor& probs);
  torch::Tensor run_experts(const torch::Tensor& slots, int64_t capacity);
  // The emulated device's half of the layer's compute (none without emulation).
  torch::Tensor emulate_half(const torch::Tensor& t) const;

  MoeConfig config_;
  std::shared_ptr<const parallel::ExpertCommunication> communication_;
  std::shared_ptr<const SequenceSplit> split_;
  int64_t first_expert_ = 0;
  torch::nn::Linear router{nullptr};
  std::vector<torch::nn::Linear> fc1_, fc2_;  // the local experts'
  MoeStats stats_;
};
TORCH_MODULE(MoeLayer);

}  // namespace dualpipe::models
