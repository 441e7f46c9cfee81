// Data parallelism for the trainer (see data_parallel.h).
#include "data_parallel.h"

#include "dualpipe/error.h"

namespace dualpipe::train {
namespace {

std::vector<torch::Tensor> gradients(StageState& state) {
  std::vector<torch::Tensor> grads;
  for (auto& p : state.module->parameters())
    if (p.grad().defined()) grads.push_back(p.grad());
  return grads;
}

}  // namespace

DataParallel::DataParallel(c10::intrusive_ptr<c10d::ProcessGroup> group, std::shared_ptr<comm::Communicator> world)
    : group_(std::move(group)), world_(std::move(world)) {}

void DataParallel::average_gradients(std::map<int, StageState>& stages) const {
  if (replicas() == 1) return;
  for (auto& [stage, state] : stages) {
    std::vector<torch::Tensor> grads = gradients(state);
    if (grads.empty()) continue;
    // One flat buffer per stage: one collective instead of one per tensor.
    std::vector<torch::Tensor> views;
    for (const auto& g : grads) views.push_back(g.reshape({-1}));
    std::vector<torch::Tensor> flat = {torch::cat(views)};
    group_->allreduce(flat)->wait();
    flat[0].div_(replicas());
    int64_t offset = 0;
    for (auto& g : grads) {
      g.copy_(flat[0].narrow(0, offset, g.numel()).view_as(g));
      offset += g.numel();
    }
  }
}

double DataParallel::mean(double value) const {
  if (replicas() == 1) return value;
  std::vector<torch::Tensor> t = {torch::full({1}, value, torch::kDouble)};
  group_->allreduce(t)->wait();
  return t[0].item<double>() / replicas();
}

int DataParallel::check_replicas_identical(const std::map<int, StageState>& stages) const {
  if (replicas() == 1) return 0;
  int compared = 0;
  for (const auto& [stage, state] : stages) {
    for (const auto& p : state.module->named_parameters()) {
      std::vector<torch::Tensor> theirs = {p.value().detach().clone()};
      group_->broadcast(theirs)->wait();  // replica 0's
      if (!torch::equal(theirs[0], p.value()))
        throw Error(detail::concat("data-parallel replica ", replica(), " differs from replica 0 in stage ", stage,
                                   " parameter ", p.key(), " (max difference ",
                                   (theirs[0] - p.value()).abs().max().item<double>(), ")"));
      ++compared;
    }
  }
  return compared;
}

void DataParallel::world_barrier() const {
  if (world_) world_->barrier();
}

}  // namespace dualpipe::train
