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

// An exchange between its start and its end.
struct Started {
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  torch::Tensor output;  // on the host where Gloo carries a device tensor
  std::chrono::steady_clock::time_point start;
};

Started start(const torch::Tensor& x, c10d::ProcessGroup& group) {
  Started s;
  s.start = std::chrono::steady_clock::now();
  // Gloo's sends and receives move host memory (its collectives stage device tensors themselves): a device
  // tensor goes through a host copy, and the result comes back to the device after the exchange.
  const bool through_host = !x.is_cpu() && group.getBackendName() == "gloo";
  torch::Tensor input = through_host ? x.to(torch::kCPU).contiguous() : x.contiguous();
  s.output = torch::empty_like(input);
  s.works = start_exchange(group, s.output, input);
  return s;
}

// Waits for `works`, letting the overlap's other half take its turn meanwhile (runtime::yield_overlap_turn).
void wait_taking_turns(const std::vector<c10::intrusive_ptr<c10d::Work>>& works) {
  // The other half of an overlapped pair computes while the exchange runs, and the half whose exchange ends first
  // goes on. Gloo's sends and receives complete only inside wait() (isCompleted() stays false until then), so a
  // waiting thread tells when they have ended; without it, the turn went to the other half at every exchange, even
  // where this half's exchange ended first.
  if (works.size() == 1 || !runtime::taking_overlap_turns()) {
    runtime::yield_overlap_turn([&works] { return works[0]->isCompleted(); });  // does nothing outside the turns
    for (const auto& work : works) work->wait();
    return;
  }
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

void report(const ExpertCommunication& communication, const std::string& what, const Started& s,
            std::chrono::steady_clock::time_point waited_from) {
  if (!communication.on_exchange) return;
  communication.on_exchange(what, s.start, waited_from, std::chrono::steady_clock::now());
}

torch::Tensor exchange(const torch::Tensor& x, c10d::ProcessGroup& group, const ExpertCommunication& communication,
                       const std::string& what) {
  const Started s = start(x, group);
  wait_taking_turns(s.works);
  report(communication, what, s, s.start);
  return s.output.device() == x.device() ? s.output : s.output.to(x.device());
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

struct ExchangeInFlight::State {
  Started started;
  const ExpertCommunication* communication;
  std::string what;
};

namespace {

ExchangeInFlight start_exchange_in_flight(const torch::Tensor& x, const ExpertCommunication& communication,
                                          const std::string& what, bool forward) {
  c10d::ProcessGroup& group = forward ? *communication.forward : *communication.backward;
  Started s = start(x, group);
  if (s.output.device() != x.device()) {  // Gloo through the host: the device's copy exists only at the end
    for (const auto& work : s.works) work->wait();
    report(communication, what, s, s.start);
    return ExchangeInFlight(s.output.to(x.device()));
  }
  torch::Tensor output = s.output;
  return ExchangeInFlight(output, std::make_shared<ExchangeInFlight::State>(
                                      ExchangeInFlight::State{std::move(s), &communication, what}));
}

// The forward exchange started: its output is returned before the exchange ends (ExchangeInFlight::wait).
struct StartAllToAll : torch::autograd::Function<StartAllToAll> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const ExpertCommunication* communication, const std::string& what,
                               ExchangeInFlight* in_flight) {
    ctx->saved_data["communication"] = reinterpret_cast<int64_t>(communication);
    ctx->saved_data["what"] = what;
    *in_flight = start_exchange_in_flight(x, *communication, what, /*forward=*/true);
    return in_flight->output;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    return {AllToAll::backward(ctx, std::move(grads))[0], torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

void check_exchange(const torch::Tensor& x, const ExpertCommunication& communication) {
  const int size = communication.size();
  DUALPIPE_CHECK(communication.backward && communication.backward->getSize() == size,
                 "the expert all-to-all needs a backward group of the forward group's ", size, " ranks");
  DUALPIPE_CHECK(x.dim() >= 1 && x.size(0) % size == 0, "the expert all-to-all splits the first dimension ",
                 x.sizes(), " into ", size, " equal chunks");
}

}  // namespace

void ExchangeInFlight::wait() {
  if (!state_) return;
  const std::shared_ptr<State> state = std::move(state_);
  const auto waited_from = std::chrono::steady_clock::now();
  wait_taking_turns(state->started.works);
  report(*state->communication, state->what, state->started, waited_from);
}

ExchangeInFlight start_expert_all_to_all(const torch::Tensor& x, const ExpertCommunication& communication,
                                         const std::string& what) {
  if (communication.size() == 1) return ExchangeInFlight(x);
  check_exchange(x, communication);
  ExchangeInFlight in_flight;
  // The same tensor as in_flight.output, now with the exchange's node as its gradient function.
  in_flight.output = StartAllToAll::apply(x, &communication, what, &in_flight);
  return in_flight;
}

ExchangeInFlight start_gradient_all_to_all(const torch::Tensor& grad, const ExpertCommunication& communication,
                                           const std::string& what) {
  if (communication.size() == 1) return ExchangeInFlight(grad);
  check_exchange(grad, communication);
  return start_exchange_in_flight(grad, communication, what + " backward", /*forward=*/false);
}

torch::Tensor expert_all_to_all(const torch::Tensor& x, const ExpertCommunication& communication,
                                const std::string& what) {
  const int size = communication.size();
  if (size == 1) return x;
  check_exchange(x, communication);
  // The communication outlives the graph: it belongs to the model's layer, which the graph's owner keeps.
  return AllToAll::apply(x, &communication, what);
}

}  // namespace dualpipe::parallel
