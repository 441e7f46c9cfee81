// ZeRO-1 for the trainer (see optimizer_sharding.h).
#include "dualpipe/parallel/optimizer_sharding.h"

#include <algorithm>
#include <chrono>

namespace dualpipe::parallel {
namespace {

// `parts` concatenated on the group's member `root` and broadcast; the other members get root's values back in their
// `parts` (same shapes, one dtype).
void broadcast_parts(c10d::ProcessGroup& group, int root, std::vector<torch::Tensor>& parts) {
  if (parts.empty()) return;
  const bool is_root = group.getRank() == root;
  std::vector<torch::Tensor> flat(1);
  if (is_root) {
    std::vector<torch::Tensor> views;
    for (const auto& t : parts) views.push_back(t.detach().reshape({-1}));
    flat[0] = torch::cat(views);
  } else {
    int64_t numel = 0;
    for (const auto& t : parts) numel += t.numel();
    flat[0] = torch::empty({numel}, parts.front().options());
  }
  c10d::BroadcastOptions options;
  options.rootRank = root;
  group.broadcast(flat, options)->wait();
  if (is_root) return;
  torch::NoGradGuard no_grad;
  int64_t offset = 0;
  for (auto& t : parts) {
    t.copy_(flat[0].narrow(0, offset, t.numel()).view_as(t));
    offset += t.numel();
  }
}

}  // namespace

OptimizerSharding::OptimizerSharding(const DataParallel& dp, const Stages& stages)
    : traffic_(dp.traffic()) {
  // Elements dealt so far to each member of each group, over all this rank's stages: a rank holding two stages
  // (DualPipe, V placements) balances its whole share, not each stage's.
  std::map<const c10d::ProcessGroup*, std::vector<int64_t>> loads;
  for (const auto& [stage, state] : stages) {
    std::vector<std::pair<int64_t, std::string>> sizes;  // largest first, then by name: the same on every member
    for (const auto& p : state.parameters)
      if (p.value().requires_grad()) sizes.emplace_back(-p.value().numel(), p.key());
    std::sort(sizes.begin(), sizes.end());
    Shard kinds[2];  // the data-parallel group's tensors, then the sharded experts'
    for (const auto& [negative_numel, name] : sizes) {
      const ParameterSplit split = state.split(name);
      const auto& group = dp.gradient_group(split);
      if (!group || group->getSize() < 2) continue;  // nobody to share with: the whole state stays here
      const int kind = dp.is_sharded_expert(split) ? 1 : 0;
      Shard& shard = kinds[kind];
      if (!shard.group) {
        shard.group = group;
        shard.names_by_owner.resize(static_cast<size_t>(group->getSize()));
      }
      auto& load = loads[group.get()];
      load.resize(static_cast<size_t>(group->getSize()), 0);
      const auto owner = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
      load[owner] -= negative_numel;
      shard.names_by_owner[owner].push_back(name);
      sharing_ranks_[stage][name] = group->getSize();
      if (static_cast<int>(owner) != group->getRank()) owned_elsewhere_[stage].insert(name);
    }
    for (Shard& shard : kinds)
      if (shard.group) shards_[stage].push_back(std::move(shard));
  }
}

void OptimizerSharding::keep_own_gradients(Stages& stages) const {
  for (const auto& [stage, shards] : shards_) {
    auto parameters = stages.at(stage).parameters;
    for (const Shard& shard : shards)
      for (size_t owner = 0; owner < shard.names_by_owner.size(); ++owner)
        if (static_cast<int>(owner) != shard.group->getRank())
          for (const auto& name : shard.names_by_owner[owner]) parameters[name].mutable_grad() = torch::Tensor();
  }
}

StartedCollectives OptimizerSharding::start_reduction_to_owners(int stage, StageParameters& state, int replicas) {
  auto parameters = state.parameters;
  for (auto& p : parameters) {
    if (!p.value().requires_grad()) continue;
    // Every member sends the same layout, whatever took part in the step.
    if (!p.value().grad().defined()) p.value().mutable_grad() = torch::zeros_like(p.value());
    if (!is_sharded(stage, p.key())) p.value().mutable_grad().div_(replicas);  // nobody to sum with
  }
  const auto found = shards_.find(stage);
  if (found == shards_.end()) return {};
  StartedCollectives started;
  for (const Shard& shard : found->second)
    for (size_t owner = 0; owner < shard.names_by_owner.size(); ++owner) {
      Reduction r;
      r.mine = static_cast<int>(owner) == shard.group->getRank();
      r.replicas = replicas;
      std::vector<torch::Tensor> gradients;
      for (const auto& name : shard.names_by_owner[owner]) {
        r.parameters.push_back(parameters[name]);
        gradients.push_back(parameters[name].grad());
      }
      if (gradients.empty()) continue;
      std::vector<torch::Tensor> buffer = {torch::flatten_dense_tensors(gradients)};
      c10d::ReduceOptions options;
      options.rootRank = static_cast<int64_t>(owner);
      traffic_->one_member(buffer[0].nbytes(), shard.group->getSize());
      r.work = shard.group->reduce(buffer, options);
      r.flat = buffer[0];
      started.bytes += r.flat.nbytes();
      started.works.push_back(r.work);
      pending_.push_back(std::move(r));
    }
  return started;
}

double OptimizerSharding::finish_reductions() {
  const auto start = std::chrono::steady_clock::now();
  torch::NoGradGuard no_grad;
  for (Reduction& r : pending_) {
    r.work->wait();
    if (!r.mine) {
      for (auto& p : r.parameters) p.mutable_grad() = torch::Tensor();
      continue;
    }
    r.flat.div_(r.replicas);
    const std::vector<torch::Tensor> means = torch::unflatten_dense_tensors(r.flat, r.parameters);
    for (size_t i = 0; i < means.size(); ++i) r.parameters[i].mutable_grad().copy_(means[i]);
  }
  pending_.clear();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

bool OptimizerSharding::owns(int stage, const std::string& name) const {
  const auto found = owned_elsewhere_.find(stage);
  return found == owned_elsewhere_.end() || !found->second.count(name);
}

int OptimizerSharding::sharing_ranks(int stage, const std::string& name) const {
  const auto in_stage = sharing_ranks_.find(stage);
  if (in_stage == sharing_ranks_.end()) return 1;
  const auto found = in_stage->second.find(name);
  return found == in_stage->second.end() ? 1 : found->second;
}

void OptimizerSharding::share_updates(Stages& stages) const {
  for (const auto& [stage, shards] : shards_) {
    auto parameters = stages.at(stage).parameters;
    for (const Shard& shard : shards)
      for (size_t owner = 0; owner < shard.names_by_owner.size(); ++owner) {
        std::vector<torch::Tensor> parts;
        size_t bytes = 0;
        for (const auto& name : shard.names_by_owner[owner]) {
          parts.push_back(parameters[name]);
          bytes += parts.back().nbytes();
        }
        traffic_->one_member(bytes, shard.group->getSize());
        broadcast_parts(*shard.group, static_cast<int>(owner), parts);
      }
  }
}

void OptimizerSharding::gather_state(Stages& stages) const {
  for (const auto& [stage, shards] : shards_) {
    StageParameters& state = stages.at(stage);
    auto parameters = state.parameters;
    for (const Shard& shard : shards)
      for (size_t owner = 0; owner < shard.names_by_owner.size(); ++owner) {
        const auto& names = shard.names_by_owner[owner];
        const bool mine = static_cast<int>(owner) == shard.group->getRank();
        // exp_avg of every tensor, then exp_avg_sq; the steps apart (integers). Step -1: not stepped yet.
        std::vector<torch::Tensor> moments(2 * names.size());
        std::vector<torch::Tensor> steps = {torch::full({int64_t(names.size())}, -1, torch::kLong)};
        for (size_t i = 0; i < names.size(); ++i) {
          const torch::Tensor& p = parameters[names[i]];
          const auto* adam = mine ? adam_state(*state.optimizer, p) : nullptr;
          moments[i] = adam ? adam->exp_avg() : torch::zeros_like(p);
          moments[names.size() + i] = adam ? adam->exp_avg_sq() : torch::zeros_like(p);
          if (adam) steps[0][int64_t(i)].fill_(adam->step());
        }
        broadcast_parts(*shard.group, static_cast<int>(owner), steps);
        broadcast_parts(*shard.group, static_cast<int>(owner), moments);
        if (mine) continue;
        for (size_t i = 0; i < names.size(); ++i) {
          const int64_t step = steps[0][int64_t(i)].item<int64_t>();
          if (step >= 0)
            set_adam_state(*state.optimizer, parameters[names[i]], step, moments[i], moments[names.size() + i]);
        }
      }
  }
}

void OptimizerSharding::drop_unowned_state(Stages& stages) const {
  for (const auto& [stage, shards] : shards_) {
    StageParameters& state = stages.at(stage);
    auto parameters = state.parameters;
    for (const Shard& shard : shards)
      for (size_t owner = 0; owner < shard.names_by_owner.size(); ++owner)
        if (static_cast<int>(owner) != shard.group->getRank())
          for (const auto& name : shard.names_by_owner[owner]) drop_adam_state(*state.optimizer, parameters[name]);
  }
}

}  // namespace dualpipe::parallel
