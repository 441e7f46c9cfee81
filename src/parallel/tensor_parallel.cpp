// The differentiable collectives of tensor parallelism (see tensor_parallel.h).
#include "dualpipe/parallel/tensor_parallel.h"

#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <vector>

#include "dualpipe/runtime/unmetered_memory.h"
#include "finish_collective.h"
#include "wire_tensor.h"

namespace dualpipe::parallel {
namespace {

// (T-1)/T of `bytes`: what each rank of a ring sends in one pass round it.
int64_t ring_bytes(const TensorParallelGroup& tp, size_t bytes) {
  return std::llround(static_cast<double>(bytes) * (tp.size() - 1) / tp.size());
}

enum class Pass { forward, backward };

c10d::ProcessGroup& group_for(const TensorParallelGroup& tp, Pass pass) {
  return pass == Pass::backward && tp.backward ? *tp.backward : *tp.group;
}

torch::Tensor all_reduce(const torch::Tensor& x, const TensorParallelGroup& tp, c10d::ReduceOp op,
                         Pass pass = Pass::forward) {
  c10d::ProcessGroup& group = group_for(tp, pass);
  std::vector<torch::Tensor> buffer = {detail::on_the_wire(x, group, /*writable=*/true)};
  c10d::AllreduceOptions options;
  options.reduceOp = op;
  tp.ring_bytes_sent += ring_bytes(tp, 2 * buffer[0].nbytes());
  detail::finish_collective(group, group.allreduce(buffer, options));
  return buffer[0].to(x.device());
}

// Every rank's `x`, in tensor-rank order.
std::vector<torch::Tensor> gather_from_every_rank(const torch::Tensor& x, const TensorParallelGroup& tp,
                                                  Pass pass = Pass::forward) {
  c10d::ProcessGroup& group = group_for(tp, pass);
  std::vector<torch::Tensor> mine = {detail::on_the_wire(x, group)};
  std::vector<std::vector<torch::Tensor>> gathered(1);
  for (int i = 0; i < tp.size(); ++i) gathered[0].push_back(torch::empty_like(mine[0]));
  tp.ring_bytes_sent += ring_bytes(tp, mine[0].nbytes() * static_cast<size_t>(tp.size()));
  detail::finish_collective(group, group.allgather(gathered, mine));
  for (auto& part : gathered[0]) part = part.to(x.device());
  return gathered[0];
}

// [rows, tokens, ...] from the group's [rows, tokens / T, ...], in tensor-rank order.
torch::Tensor all_gather_tokens(const torch::Tensor& x, const TensorParallelGroup& tp, Pass pass) {
  return torch::cat(gather_from_every_rank(x, tp, pass), 1);
}

// This rank's tokens / T of the sum over the group of [rows, tokens, ...].
torch::Tensor reduce_scatter_tokens(const torch::Tensor& x, const TensorParallelGroup& tp, Pass pass) {
  c10d::ProcessGroup& group = group_for(tp, pass);
  const std::vector<torch::Tensor> parts = x.chunk(tp.size(), 1);
  const bool through_host = !x.is_cpu() && group.getBackendName() == "gloo";
  const auto wire = x.options().device(through_host ? c10::Device(c10::kCPU) : x.device());
  torch::Tensor result = torch::empty(parts[0].sizes(), wire);
  tp.ring_bytes_sent += ring_bytes(tp, x.nbytes());
  {
    // Gloo's reduce-scatter runs as collectives of its own, which hold our inputs and output and let go of them on
    // their threads, where the activation meter does not hear the frees. So the messages are kept out of the meter
    // from allocation to free, and the sum is copied into the result, which lives on (and is metered).
    runtime::UnmeteredMemory unmetered;
    std::vector<std::vector<torch::Tensor>> chunks(1);
    for (const torch::Tensor& part : parts) chunks[0].push_back(detail::on_the_wire(part, group));
    std::vector<torch::Tensor> sum = {torch::empty(parts[0].sizes(), wire)};
    detail::finish_collective(group, group.reduce_scatter(sum, chunks));
    result.copy_(sum[0]);
  }
  return result.to(x.device());
}

// The group is kept by the stage's layers, which the graph's owner keeps: a raw pointer in the context is safe.
const TensorParallelGroup& tensor_group_of(torch::autograd::AutogradContext* ctx) {
  return *reinterpret_cast<const TensorParallelGroup*>(ctx->saved_data["group"].toInt());
}

struct CopyToTensorParallel : torch::autograd::Function<CopyToTensorParallel> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const TensorParallelGroup* tp) {
    ctx->saved_data["group"] = reinterpret_cast<int64_t>(tp);
    return x.view_as(x);  // a new tensor of the same values: autograd needs an output of its own
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    return {all_reduce(grads[0], tensor_group_of(ctx), c10d::ReduceOp::SUM, Pass::backward), torch::Tensor()};
  }
};

struct ReduceFromTensorParallel : torch::autograd::Function<ReduceFromTensorParallel> {
  static torch::Tensor forward(torch::autograd::AutogradContext*, const torch::Tensor& x,
                               const TensorParallelGroup* tp) {
    return all_reduce(x, *tp, c10d::ReduceOp::SUM);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::variable_list grads) {
    return {grads[0], torch::Tensor()};
  }
};

struct GatherSequence : torch::autograd::Function<GatherSequence> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const TensorParallelGroup* tp) {
    ctx->saved_data["group"] = reinterpret_cast<int64_t>(tp);
    return all_gather_tokens(x, *tp, Pass::forward);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    return {reduce_scatter_tokens(grads[0], tensor_group_of(ctx), Pass::backward), torch::Tensor()};
  }
};

struct ReduceScatterSequence : torch::autograd::Function<ReduceScatterSequence> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const TensorParallelGroup* tp) {
    ctx->saved_data["group"] = reinterpret_cast<int64_t>(tp);
    return reduce_scatter_tokens(x, *tp, Pass::forward);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    return {all_gather_tokens(grads[0], tensor_group_of(ctx), Pass::backward), torch::Tensor()};
  }
};

// `Function` (an autograd function of this file) over a group of more than one rank; `x` itself otherwise.
template <typename Function>
torch::Tensor over_group(const torch::Tensor& x, const TensorGroup& tp) {
  return tp && tp->size() > 1 ? Function::apply(x, tp.get()) : x;
}

}  // namespace

torch::Tensor gather_sequence(const torch::Tensor& x, const TensorGroup& tp) {
  return over_group<GatherSequence>(x, tp);
}

torch::Tensor reduce_scatter_sequence(const torch::Tensor& x, const TensorGroup& tp) {
  return over_group<ReduceScatterSequence>(x, tp);
}

torch::Tensor enter_tensor_parallel(const torch::Tensor& x, const TensorGroup& tp) {
  return splits_sequence(tp) ? gather_sequence(x, tp) : copy_to_tensor_parallel(x, tp);
}

torch::Tensor leave_tensor_parallel(const torch::Tensor& x, const TensorGroup& tp) {
  return splits_sequence(tp) ? reduce_scatter_sequence(x, tp) : reduce_from_tensor_parallel(x, tp);
}

torch::Tensor copy_to_tensor_parallel(const torch::Tensor& x, const TensorGroup& tp) {
  return over_group<CopyToTensorParallel>(x, tp);
}

torch::Tensor reduce_from_tensor_parallel(const torch::Tensor& x, const TensorGroup& tp) {
  return over_group<ReduceFromTensorParallel>(x, tp);
}

torch::Tensor sum_over_tensor_parallel(const torch::Tensor& x, const TensorGroup& tp) {
  if (!tp || tp->size() == 1) return x.detach();
  return all_reduce(x, *tp, c10d::ReduceOp::SUM);
}

torch::Tensor max_over_tensor_parallel(const torch::Tensor& x, const TensorGroup& tp) {
  if (!tp || tp->size() == 1) return x.detach();
  return all_reduce(x, *tp, c10d::ReduceOp::MAX);
}

std::vector<torch::Tensor> all_gather(const torch::Tensor& x, const TensorGroup& tp) {
  if (!tp || tp->size() == 1) return {x.detach()};
  return gather_from_every_rank(x, *tp);
}

torch::Tensor gather_last_dim(const torch::Tensor& x, const TensorGroup& tp) {
  return torch::cat(all_gather(x, tp), -1);
}

}  // namespace dualpipe::parallel
