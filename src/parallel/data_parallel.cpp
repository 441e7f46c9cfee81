// Data parallelism for the trainer (see data_parallel.h).
#include "dualpipe/parallel/data_parallel.h"

#include <chrono>

#include "dualpipe/util/error.h"

namespace dualpipe::parallel {
namespace {

bool sharded(const c10::intrusive_ptr<c10d::ProcessGroup>& group) { return group && group->getSize() > 1; }

}  // namespace

DataParallel::DataParallel(c10::intrusive_ptr<c10d::ProcessGroup> group, std::shared_ptr<comm::Communicator> world,
                           c10::intrusive_ptr<c10d::ProcessGroup> expert_group,
                           c10::intrusive_ptr<c10d::ProcessGroup> expert_data_parallel)
    : group_(std::move(group)), expert_group_(std::move(expert_group)),
      expert_data_parallel_(std::move(expert_data_parallel)), world_(std::move(world)) {}

StartedCollectives DataParallel::start(int stage, StageParameters& state, bool join_copies) {
  const auto copies = join_copies ? copy_groups_.find(stage) : copy_groups_.end();
  const bool joined = copies != copy_groups_.end();
  if (replicas() == 1 && !joined) return {};
  std::vector<torch::Tensor> dense, experts;
  for (auto& p : state.parameters) {
    if (!p.value().requires_grad()) continue;
    // Every holder sends the same layout, even where a parameter took no part in this step (an expert that got
    // no tokens, with a LibTorch whose zero_grad sets gradients to none).
    if (!p.value().grad().defined()) p.value().mutable_grad() = torch::zeros_like(p.value());
    (is_sharded_expert(state.split(p.key())) ? experts : dense).push_back(p.value().grad());
  }
  StartedCollectives started = start_bucket(std::move(dense), joined ? copies->second.dense : group_);
  started += start_bucket(std::move(experts), joined ? copies->second.experts : expert_data_parallel_);
  return started;
}

StartedCollectives DataParallel::start_bucket(std::vector<torch::Tensor> gradients,
                                              const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  if (gradients.empty()) return {};
  Bucket bucket;
  bucket.gradients = std::move(gradients);
  std::vector<torch::Tensor> views;
  for (const auto& g : bucket.gradients) views.push_back(g.reshape({-1}));
  bucket.flat = {torch::cat(views)};
  if (group && group->getSize() > 1) {
    traffic_->all_reduce(bucket.flat[0].nbytes(), group->getSize());
    bucket.work = group->allreduce(bucket.flat);
  }
  StartedCollectives started{static_cast<int64_t>(bucket.flat[0].nbytes()), {}};
  if (bucket.work) started.works.push_back(bucket.work);
  buckets_.push_back(std::move(bucket));
  return started;
}

double DataParallel::finish() {
  const auto start = std::chrono::steady_clock::now();
  for (Bucket& bucket : buckets_) {
    if (bucket.work) bucket.work->wait();
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

double DataParallel::mean(double value) const {
  if (replicas() == 1) return value;
  std::vector<torch::Tensor> t = {torch::full({1}, value, torch::kDouble)};
  group_->allreduce(t)->wait();
  return t[0].item<double>() / replicas();
}

void DataParallel::sum(torch::Tensor& values) const {
  if (replicas() == 1) return;
  std::vector<torch::Tensor> t = {values};
  group_->allreduce(t)->wait();
}

double DataParallel::sum_over_expert_group(double value) const {
  if (!sharded(expert_group_)) return value;
  std::vector<torch::Tensor> t = {torch::full({1}, value, torch::kDouble)};
  expert_group_->allreduce(t)->wait();
  return t[0].item<double>();
}

void DataParallel::sum_over_expert_data_parallel(torch::Tensor& values) const {
  if (!sharded(expert_data_parallel_)) return;
  std::vector<torch::Tensor> t = {values};
  expert_data_parallel_->allreduce(t)->wait();
}

int DataParallel::check_replicas_identical(const Stages& stages) const {
  if (replicas() == 1) return 0;
  int compared = 0;
  for (const auto& [stage, state] : stages) {
    for (const auto& p : state.parameters) {
      const auto& group = gradient_group(state.split(p.key()));
      if (!sharded(group)) continue;  // an expert with no other holder
      std::vector<torch::Tensor> theirs = {p.value().detach().clone()};
      group->broadcast(theirs)->wait();  // the first holder's
      if (!torch::equal(theirs[0], p.value()))
        throw Error(dualpipe::detail::concat("data-parallel replica ", replica(), " differs from replica 0 in stage ",
                                             stage, " parameter ", p.key(), " (max difference ",
                                             (theirs[0] - p.value()).abs().max().item<double>(), ")"));
      ++compared;
    }
  }
  return compared;
}

bool DataParallel::is_sharded_expert(ParameterSplit split) const {
  return sharded(expert_group_) && split == ParameterSplit::Expert;
}

void DataParallel::world_barrier() const {
  if (world_) world_->barrier();
}

}  // namespace dualpipe::parallel
