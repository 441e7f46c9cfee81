// Data parallelism for the trainer (see data_parallel.h).
#include "data_parallel.h"

#include <chrono>

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

void DataParallel::start(StageState& state) {
  if (replicas() == 1) return;
  Bucket bucket;
  bucket.gradients = gradients(state);
  if (bucket.gradients.empty()) return;
  std::vector<torch::Tensor> views;
  for (const auto& g : bucket.gradients) views.push_back(g.reshape({-1}));
  bucket.flat = {torch::cat(views)};
  bucket.work = group_->allreduce(bucket.flat);
  buckets_.push_back(std::move(bucket));
}

double DataParallel::finish() {
  const auto start = std::chrono::steady_clock::now();
  for (Bucket& bucket : buckets_) {
    bucket.work->wait();
    torch::Tensor& flat = bucket.flat[0];
    flat.div_(replicas());
    int64_t offset = 0;
    for (auto& g : bucket.gradients) {
      g.copy_(flat.narrow(0, offset, g.numel()).view_as(g));
      offset += g.numel();
    }
  }
  buckets_.clear();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

double DataParallel::average_gradients(std::map<int, StageState>& stages) {
  const auto start = std::chrono::steady_clock::now();
  for (auto& [stage, state] : stages) this->start(state);
  finish();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
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
