// The differentiable expert all-to-all (see expert_all_to_all.h).
#include "dualpipe/parallel/expert_all_to_all.h"

#include <torch/csrc/autograd/custom_function.h>

#include <atomic>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "dualpipe/runtime/concurrent_overlap.h"
#include "dualpipe/util/error.h"

namespace dualpipe::parallel {
namespace {

// Starts the exchange of `input`'s chunks into `output`'s. Gloo's alltoall sends to and receives from its peers
// one after the other, so over a full-duplex link an exchange took twice the link's time (measured on the test
// bed: 40 ms for 250 KB each way at 100 Mbit/s, 23 ms as the concurrent sends and receives below, 20 over raw
// TCP); other backends (NCCL's grouped sends and receives) get the collective.
std::vector<c10::intrusive_ptr<c10d::Work>> start_exchange(c10d::ProcessGroup& group, torch::Tensor& output,
                                                           torch::Tensor& input) {
  if (group.getBackendName() != "gloo") {
    std::vector<int64_t> equal_splits;  // empty: equal chunks of the first dimension
    return {group.alltoall_base(output, input, equal_splits, equal_splits)};
  }
  const int size = group.getSize(), rank = group.getRank();
  const int64_t rows = input.size(0) / size;
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (int step = 1; step < size; ++step) {  // each rank sends to rank + step as rank - step sends to it
    const int to = (rank + step) % size, from = (rank + size - step) % size;
    std::vector<torch::Tensor> sent = {input.narrow(0, to * rows, rows)};
    std::vector<torch::Tensor> received = {output.narrow(0, from * rows, rows)};
    works.push_back(group.send(sent, to, 0));
    works.push_back(group.recv(received, from, 0));
  }
  output.narrow(0, rank * rows, rows).copy_(input.narrow(0, rank * rows, rows));
  return works;
}

torch::Tensor exchange(const torch::Tensor& x, c10d::ProcessGroup& group, const ExpertCommunication& communication,
                       const std::string& what) {
  const auto start = std::chrono::steady_clock::now();
  // Gloo's sends and receives move host memory (its collectives stage device tensors themselves): a device
  // tensor goes through a host copy, and the result comes back to the device after the exchange.
  const bool through_host = !x.is_cpu() && group.getBackendName() == "gloo";
  torch::Tensor input = through_host ? x.to(torch::kCPU).contiguous() : x.contiguous();
  torch::Tensor output = torch::empty_like(input);
  const std::vector<c10::intrusive_ptr<c10d::Work>> works = start_exchange(group, output, input);
  // The other half of an overlapped pair computes while the exchange runs, and the half whose exchange ends first
  // goes on. Gloo's sends and receives complete only inside wait() (isCompleted() stays false until then), so a
  // waiting thread tells when they have ended; without it, the turn went to the other half at every exchange, even
  // where this half's exchange ended first.
  if (works.size() == 1 || !runtime::taking_overlap_turns()) {
    runtime::yield_overlap_turn([&works] { return works[0]->isCompleted(); });  // does nothing outside the turns
    for (const auto& work : works) work->wait();
  } else {
    std::atomic<bool> ended{false};
    std::exception_ptr error;
    std::thread waiter([&] {
      try {
        for (const auto& work : works) work->wait();
      } catch (...) {
        error = std::current_exception();
      }
      ended = true;
    });
    runtime::yield_overlap_turn([&ended] { return ended.load(); });
    waiter.join();
    if (error) std::rethrow_exception(error);
  }
  if (communication.on_exchange) communication.on_exchange(what, start, std::chrono::steady_clock::now());
  return through_host ? output.to(x.device()) : output;
}

struct AllToAll : torch::autograd::Function<AllToAll> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const ExpertCommunication* communication, const std::string& what) {
    ctx->saved_data["communication"] = reinterpret_cast<int64_t>(communication);
    ctx->saved_data["what"] = what;
    return exchange(x, *communication->forward, *communication, what);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto* communication = reinterpret_cast<const ExpertCommunication*>(ctx->saved_data["communication"].toInt());
    const std::string what = ctx->saved_data["what"].toStringRef() + " backward";
    return {exchange(grads[0], *communication->backward, *communication, what), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor expert_all_to_all(const torch::Tensor& x, const ExpertCommunication& communication,
                                const std::string& what) {
  const int size = communication.size();
  if (size == 1) return x;
  DUALPIPE_CHECK(communication.backward && communication.backward->getSize() == size,
                 "the expert all-to-all needs a backward group of the forward group's ", size, " ranks");
  DUALPIPE_CHECK(x.dim() >= 1 && x.size(0) % size == 0, "the expert all-to-all splits the first dimension ",
                 x.sizes(), " into ", size, " equal chunks");
  // The communication outlives the graph: it belongs to the model's layer, which the graph's owner keeps.
  return AllToAll::apply(x, &communication, what);
}

}  // namespace dualpipe::parallel
