#include "dualpipe/models/moe.h"

#include <torch/csrc/autograd/custom_function.h>
#include <torch/torch.h>

#include <cmath>

#include "dualpipe/util/error.h"
#include "emulated_compute.h"
#include "init.h"

namespace dualpipe::models {
namespace {

// Streams of the router and experts of a layer, far from the dense model's (gpt.cpp: 0, 1, 1000 + layer).
uint64_t expert_stream(int layer, int64_t expert) {  // expert -1: the router
  return (uint64_t{1} << 40) + (static_cast<uint64_t>(layer) << 21) + static_cast<uint64_t>(expert + 1);
}

// Identity on `y` in the forward; in the backward, also the gradient `weight` for the scalar `aux`, so the
// auxiliary loss joins the backward of the stage without being added to what the pipeline passes on.
struct AttachAuxLoss : torch::autograd::Function<AttachAuxLoss> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& y, const torch::Tensor& aux,
                               double weight) {
    ctx->saved_data["weight"] = weight;
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const double weight = ctx->saved_data["weight"].toDouble();
    return {grads[0], torch::full({}, weight, grads[0].options()), torch::Tensor()};
  }
};

}  // namespace

void MoeConfig::check() const {
  DUALPIPE_REQUIRE(experts >= 0 && experts <= 4096, "--experts must be between 0 (a dense MLP) and 4096, got ",
                   experts);
  if (experts == 0) return;
  DUALPIPE_REQUIRE(top_k >= 1 && top_k <= experts, "--top-k ", top_k, " must be between 1 and --experts ", experts,
                   ": each token chooses that many distinct experts");
  DUALPIPE_REQUIRE(std::isfinite(capacity_factor) && capacity_factor > 0 && capacity_factor <= 64,
                   "--capacity-factor must be in (0, 64], got ", capacity_factor);
  DUALPIPE_REQUIRE(std::isfinite(aux_loss_weight) && aux_loss_weight >= 0 && aux_loss_weight <= 100,
                   "--aux-loss must be between 0 and 100, got ", aux_loss_weight);
}

void MoeStats::add(const MoeStats& other) {
  choices += other.choices;
  dropped += other.dropped;
  aux_loss_sum += other.aux_loss_sum;
  aux_losses += other.aux_losses;
}

bool is_expert_parameter(const std::string& name) { return name.find(".moe.expert") != std::string::npos; }

MoeLayerImpl::MoeLayerImpl(const MoeConfig& c, int64_t hidden, uint64_t seed, int layer, int layers,
                           std::shared_ptr<const parallel::ExpertCommunication> communication,
                           std::shared_ptr<const SequenceSplit> split)
    : config_(c), communication_(std::move(communication)), split_(std::move(split)) {
  c.check();
  DUALPIPE_REQUIRE(c.experts >= 1, "an MoE layer needs --experts >= 1");
  const int group = communication_ ? communication_->size() : 1;
  DUALPIPE_REQUIRE(c.experts % group == 0, "--experts ", c.experts, " must be divisible by --ep ", group,
                   ": each rank of an expert-parallel group holds the same number of experts");
  const int64_t local = c.experts / group;
  first_expert_ = (communication_ ? communication_->rank() : 0) * local;
  torch::NoGradGuard no_grad;
  router = register_module("router", torch::nn::Linear(torch::nn::LinearOptions(hidden, c.experts).bias(false)));
  auto gen = init::generator(seed, expert_stream(layer, -1));
  init::init_linear(router, init::kInitStd, gen);
  const double residual_std = init::kInitStd / std::sqrt(2.0 * layers);
  for (int64_t j = 0; j < local; ++j) {
    const int64_t e = first_expert_ + j;
    auto expert = std::make_shared<torch::nn::Module>();
    fc1_.push_back(expert->register_module("fc1", torch::nn::Linear(hidden, 4 * hidden)));
    fc2_.push_back(expert->register_module("fc2", torch::nn::Linear(4 * hidden, hidden)));
    register_module("expert" + std::to_string(e), expert);
    auto expert_gen = init::generator(seed, expert_stream(layer, e));
    init::init_linear(fc1_.back(), init::kInitStd, expert_gen);
    init::init_linear(fc2_.back(), residual_std, expert_gen);
  }
}

struct MoeLayerImpl::Routing {
  int64_t capacity = 0;
  torch::Tensor token;  // [kept]: the token of each kept choice, choices in slot-taking order
  torch::Tensor slot;   // [kept]: its slot, expert * capacity + position
  torch::Tensor gate;   // [kept]: its weight in the combine
  torch::Tensor aux_loss;
};

// The micro-batch whose expert queues this rank's choices join: with its sequences split, every rank's tokens.
struct MoeLayerImpl::WholeMicrobatch {
  torch::Tensor expert;     // [tokens, k]: every token's choices, in the micro-batch's token order
  torch::Tensor probs_sum;  // [N]: the router probabilities summed over those tokens (no gradient)
  torch::Tensor mine;       // [this rank's tokens]: their places in that order (undefined: all of them, in order)
};

MoeLayerImpl::WholeMicrobatch MoeLayerImpl::gather_split(int64_t rows, const torch::Tensor& expert,
                                                         const torch::Tensor& probs) {
  const int64_t local = expert.size(0), k = expert.size(1), N = config_.experts;
  const int ranks = split_->size;
  const int64_t seq = local / rows * ranks;  // tokens per sequence
  // One message per rank: its choices (exact as doubles) and its probability sums.
  const torch::Tensor packed =
      torch::cat({expert.reshape(-1).to(torch::kDouble), probs.detach().sum(0).to(torch::kDouble)});
  const torch::Tensor all = split_->gather(packed);  // [ranks, local * k + N]
  // Rank r's token j of row i sits at i x seq + its position in the sequence.
  const auto places = [&](int r) {
    const torch::Tensor row_starts = torch::arange(rows, expert.options()) * seq;
    return (row_starts.unsqueeze(1) + split_->positions(seq, r, expert.device()).unsqueeze(0)).reshape(-1);
  };
  WholeMicrobatch whole;
  whole.expert = torch::empty({rows * seq, k}, expert.options());
  for (int r = 0; r < ranks; ++r)
    whole.expert.index_copy_(0, places(r), all[r].narrow(0, 0, local * k).view({local, k}).to(torch::kLong));
  whole.probs_sum = all.narrow(1, local * k, N).sum(0).to(probs.scalar_type());
  whole.mine = places(split_->rank);
  return whole;
}

MoeLayerImpl::Routing MoeLayerImpl::route(const torch::Tensor& x, int64_t rows) {
  const int64_t T = x.size(0), N = config_.experts, k = config_.top_k;
  const torch::Tensor probs = torch::softmax(router(x), -1);  // [T, N]
  auto [gate, expert] = probs.topk(k, -1);                   // [T, k]
  if (k > 1) gate = gate / gate.sum(-1, true);
  WholeMicrobatch whole{expert, probs.detach().sum(0), torch::Tensor()};
  if (split_ && split_->size > 1) whole = gather_split(rows, expert, probs);
  const int64_t W = whole.expert.size(0);  // the micro-batch's tokens
  Routing r;
  r.capacity = static_cast<int64_t>(std::ceil(config_.capacity_factor * double(W * k) / double(N)));
  // Choice-major order: assignment a = c * W + t is token t's c-th choice.
  const torch::Tensor all_chosen = whole.expert.t().reshape({-1});
  const torch::Tensor one_hot = torch::one_hot(all_chosen, N);  // [kW, N]
  const torch::Tensor all_positions = (one_hot.cumsum(0) - 1).gather(1, all_chosen.unsqueeze(1)).squeeze(1);
  // This rank's assignments, in the same order: c * T + t for its token t's c-th choice.
  const torch::Tensor position =
      whole.mine.defined() ? all_positions.view({k, W}).index_select(1, whole.mine).reshape({-1}) : all_positions;
  const torch::Tensor chosen = expert.t().reshape({-1});
  const torch::Tensor kept = (position < r.capacity).nonzero().squeeze(1);
  r.token = kept.remainder(T);
  r.slot = chosen.index_select(0, kept) * r.capacity + position.index_select(0, kept);
  r.gate = gate.t().reshape({-1}).index_select(0, kept);
  // Switch Transformer's load-balancing loss: N * sum_e (fraction of choices to e) * (mean probability of e).
  // This rank's tokens' share of the mean carries the gradient; the shares' gradients add up over the split's
  // group as the language-model loss's do.
  const torch::Tensor fraction = one_hot.sum(0).to(probs.scalar_type()) / double(W * k);
  r.aux_loss = double(N) * (fraction * (probs.sum(0) / double(W))).sum();

  // The statistics are the micro-batch's, the same on every rank of the split's group.
  stats_.choices += W * k;
  stats_.dropped += (all_positions >= r.capacity).sum().item<int64_t>();
  stats_.aux_loss_sum += double(N) * (fraction * (whole.probs_sum / double(W))).sum().item<double>();
  stats_.aux_losses += 1;
  return r;
}

// slots: [E * L * C, hidden], from each of the E ranks of the group the C slots of each of the L local experts.
torch::Tensor MoeLayerImpl::run_experts(const torch::Tensor& slots, int64_t capacity) {
  const int64_t local = static_cast<int64_t>(fc1_.size()), hidden = slots.size(1);
  const torch::Tensor by_source = slots.view({-1, local, capacity, hidden});
  std::vector<torch::Tensor> outputs;
  for (int64_t source = 0; source < by_source.size(0); ++source)
    for (int64_t j = 0; j < local; ++j)
      outputs.push_back(fc2_[j](torch::gelu(fc1_[j](by_source[source][j]))));
  return torch::stack(outputs).view({-1, hidden});
}

struct MoeInFlight {
  const parallel::ExpertCommunication* group = nullptr;
  torch::Tensor input;   // the layer's (for its shape)
  torch::Tensor tokens;  // [rows x tokens, hidden]
  int64_t capacity = 0;
  torch::Tensor token, slot;  // of each kept choice (Routing)
  torch::Tensor gate, aux_loss;  // handed from the first phase to the last (aux_loss undefined: not attached)
  PaddedExchange dispatch, combine;
};

const parallel::ExpertCommunication& MoeLayerImpl::communication() const {
  static const parallel::ExpertCommunication kAlone;
  return communication_ ? *communication_ : kAlone;
}

// With an emulated device, half of the layer's compute comes before the dispatch and half between the dispatch and
// the combine, so each exchange has compute on both sides of it, in the forward and in the backward.
torch::Tensor MoeLayerImpl::emulate_half(const torch::Tensor& t) const {
  const EmulatedLayer& device = config_.emulated;
  return emulated_compute(t, router->weight, device.forward_us / 2, device.input_grad_us / 2,
                          device.weight_grad_us / 2);
}

std::shared_ptr<MoeInFlight> MoeLayerImpl::start_dispatch(const torch::Tensor& x) {
  auto f = std::make_shared<MoeInFlight>();
  f->group = &communication();
  const int64_t hidden = x.size(-1);
  f->input = x;
  f->tokens = emulate_half(x.reshape({-1, hidden}));
  Routing r = route(f->tokens, x.size(0));
  f->capacity = r.capacity;
  f->token = r.token;
  f->slot = r.slot;
  // Through a node of their own (view_as): a backward cut here stops at them without reaching the router.
  f->gate = r.gate.view_as(r.gate);
  if (config_.aux_loss_weight != 0 && torch::GradMode::is_enabled()) f->aux_loss = r.aux_loss.view_as(r.aux_loss);
  const torch::Tensor dispatch = torch::zeros({config_.experts * r.capacity, hidden}, f->tokens.options())
                                     .index_copy(0, r.slot, f->tokens.index_select(0, r.token));
  f->dispatch = start_padded_all_to_all(dispatch, *f->group, "dispatch", config_.emulated.exchange_bytes);
  return f;
}

void MoeLayerImpl::start_combine(MoeInFlight& f) {
  const torch::Tensor received = f.dispatch.result();
  f.combine = start_padded_all_to_all(emulate_half(run_experts(received, f.capacity)), *f.group, "combine",
                                      config_.emulated.exchange_bytes);
}

torch::Tensor MoeLayerImpl::finish_combine(MoeInFlight& f) {
  const torch::Tensor results = f.combine.result();
  torch::Tensor y = torch::zeros_like(f.tokens).index_add(0, f.token,
                                                          results.index_select(0, f.slot) * f.gate.unsqueeze(1));
  y = y.view_as(f.input);
  if (!f.aux_loss.defined()) return y;
  return AttachAuxLoss::apply(y, f.aux_loss, config_.aux_loss_weight);
}

MoePoints MoeLayerImpl::points(const MoeInFlight& f) {
  using runtime::GraphPoint;
  MoePoints p{GraphPoint::of(f.dispatch.sent), GraphPoint::of(f.dispatch.exchange.output),
              GraphPoint::of(f.combine.sent), GraphPoint::of(f.combine.exchange.output), {GraphPoint::of(f.gate)},
              f.group};
  if (f.aux_loss.defined()) p.handed.push_back(GraphPoint::of(f.aux_loss));
  return p;
}

torch::Tensor MoeLayerImpl::forward(const torch::Tensor& x) {
  const std::shared_ptr<MoeInFlight> f = start_dispatch(x);
  start_combine(*f);
  return finish_combine(*f);
}

}  // namespace dualpipe::models
