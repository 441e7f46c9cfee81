// Context parallelism's zig-zag split and ring attention (see context_parallel.h).
#include "dualpipe/parallel/context_parallel.h"

#include <torch/torch.h>

#include <cmath>

#include "dualpipe/util/error.h"
#include "finish_collective.h"
#include "wire_tensor.h"

namespace dualpipe::parallel {
namespace {

// A buffer to receive a tensor like `like` into, on the wire's side.
torch::Tensor wire_buffer(const torch::Tensor& like, const c10d::ProcessGroup& group) {
  const bool host = !like.is_cpu() && group.getBackendName() == "gloo";
  return torch::empty(like.sizes(), like.options().device(host ? c10::Device(c10::kCPU) : like.device()));
}

// One step of the ring in flight: this rank's block on its way to the next rank, the previous rank's on its way
// here.
struct PendingPass {
  c10::intrusive_ptr<c10d::Work> send, recv;
  torch::Tensor sent, received, out;

  void wait() {
    send->wait();
    recv->wait();
    if (received.data_ptr() != out.data_ptr()) {  // staged through host memory
      torch::NoGradGuard no_grad;
      out.detach().copy_(received);
    }
    sent = received = torch::Tensor();
  }
};

// The group is kept by the stage's layers, which the graph's owner keeps: a raw pointer in the context is safe.
const ContextParallelGroup& context_group_of(torch::autograd::AutogradContext* ctx) {
  return *reinterpret_cast<const ContextParallelGroup*>(ctx->saved_data["group"].toInt());
}

// Forward: sends `x` to the next rank of the ring and returns the previous rank's block, which is there once
// `pending` has waited (the caller computes meanwhile). Backward: the gradient goes back to the previous rank, and
// the gradient of `x` comes from the next.
struct RingPass : torch::autograd::Function<RingPass> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const ContextParallelGroup* cp, PendingPass* pending) {
    ctx->saved_data["group"] = reinterpret_cast<int64_t>(cp);
    c10d::ProcessGroup& group = *cp->group;
    const int size = cp->size(), rank = cp->rank();
    torch::Tensor out = torch::empty(x.sizes(), x.options());
    pending->out = out;
    pending->sent = detail::on_the_wire(x, group);
    pending->received = x.is_cpu() || group.getBackendName() != "gloo" ? out : wire_buffer(x, group);
    std::vector<torch::Tensor> received = {pending->received}, sent = {pending->sent};
    pending->recv = group.recv(received, (rank + size - 1) % size, 0);
    pending->send = group.send(sent, (rank + 1) % size, 0);
    cp->ring_bytes_sent += static_cast<int64_t>(x.nbytes());
    return out;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const ContextParallelGroup& cp = context_group_of(ctx);
    c10d::ProcessGroup& group = cp.backward ? *cp.backward : *cp.group;
    const int size = cp.size(), rank = cp.rank();
    std::vector<torch::Tensor> sent = {detail::on_the_wire(grads[0], group)}, received = {wire_buffer(grads[0], group)};
    auto recv = group.recv(received, (rank + 1) % size, 0);
    auto send = group.send(sent, (rank + size - 1) % size, 0);
    cp.ring_bytes_sent += static_cast<int64_t>(grads[0].nbytes());
    send->wait();
    recv->wait();
    return {received[0].to(grads[0].device()), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor context_positions(int64_t tokens, int rank, int size, c10::Device device) {
  DUALPIPE_REQUIRE(size >= 1 && rank >= 0 && rank < size && tokens % (2 * size) == 0, "a sequence of ", tokens,
                   " tokens does not divide into 2 x ", size, " chunks for context-parallel rank ", rank);
  const int64_t chunk = tokens / (2 * size);
  const auto options = torch::TensorOptions().dtype(torch::kLong).device(device);
  return torch::cat({torch::arange(rank * chunk, (rank + 1) * chunk, options),
                     torch::arange((2 * size - 1 - rank) * chunk, (2 * size - rank) * chunk, options)});
}

torch::Tensor context_slice(const torch::Tensor& x, const ContextGroup& cp) {
  if (!splits_context(cp)) return x;
  return x.index_select(1, context_positions(x.size(1), cp->rank(), cp->size(), x.device()));
}

torch::Tensor ring_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const ContextGroup& cp) {
  const int size = cp ? cp->size() : 1, rank = cp ? cp->rank() : 0;
  const int64_t local = q.size(2), tokens = local * size;
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const torch::Tensor query_positions = context_positions(tokens, rank, size, q.device());
  torch::Tensor block = torch::cat({k, v}, -1);  // one message per step of the ring
  torch::Tensor max, sum, weighted;              // per query: running maximum, sum of exponentials, their mix of v
  for (int step = 0; step < size; ++step) {
    // Start passing the block on before computing with it.
    PendingPass pending;
    torch::Tensor next;
    if (step + 1 < size) next = RingPass::apply(block, cp.get(), &pending);
    const int source = (rank + size - step) % size;
    const auto kv = block.chunk(2, -1);
    const torch::Tensor future = context_positions(tokens, source, size, q.device()).unsqueeze(0) >
                                 query_positions.unsqueeze(1);  // [queries, keys]: masked
    const torch::Tensor scores = (torch::matmul(q, kv[0].transpose(-2, -1)) * scale).masked_fill(future, -INFINITY);
    // Step 0 is this rank's own block, where every query sees itself: the maximum is finite from the start.
    const torch::Tensor block_max = std::get<0>(scores.detach().max(-1, /*keepdim=*/true));
    const torch::Tensor new_max = step == 0 ? block_max : torch::maximum(max, block_max);
    const torch::Tensor exps = torch::exp(scores - new_max);
    if (step == 0) {
      sum = exps.sum(-1, true);
      weighted = torch::matmul(exps, kv[1]);
    } else {
      const torch::Tensor rescale = torch::exp(max - new_max);
      sum = sum * rescale + exps.sum(-1, true);
      weighted = weighted * rescale + torch::matmul(exps, kv[1]);
    }
    max = new_max;
    if (next.defined()) {
      pending.wait();
      block = next;
    }
  }
  return weighted / sum;
}

torch::Tensor gather_over_context_parallel(const torch::Tensor& x, const ContextGroup& cp) {
  if (!splits_context(cp)) return x.detach().unsqueeze(0);
  std::vector<torch::Tensor> input = {detail::on_the_wire(x, *cp->group)};
  std::vector<std::vector<torch::Tensor>> output(1);
  for (int r = 0; r < cp->size(); ++r) output[0].push_back(wire_buffer(x, *cp->group));
  cp->ring_bytes_sent += static_cast<int64_t>(x.nbytes()) * (cp->size() - 1);  // a ring's all-gather
  detail::finish_collective(*cp->group, cp->group->allgather(output, input));
  return torch::stack(output[0]).to(x.device());
}

torch::Tensor sum_over_context_parallel(const torch::Tensor& x, const ContextGroup& cp) {
  if (!splits_context(cp)) return x;
  std::vector<torch::Tensor> buffer = {detail::on_the_wire(x, *cp->group, /*writable=*/true)};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;
  detail::finish_collective(*cp->group, cp->group->allreduce(buffer, options));
  return buffer[0].to(x.device());
}

}  // namespace dualpipe::parallel
