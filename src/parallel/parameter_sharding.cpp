// ZeRO-3 for the trainer (see parameter_sharding.h).
#include "dualpipe/parallel/parameter_sharding.h"

#include "dualpipe/runtime/unmetered_memory.h"

namespace dualpipe::parallel {

ParameterSharding::ParameterSharding(const OptimizerSharding& owners, Stages& stages)
    : on_(true), traffic_(owners.traffic()) {
  for (const auto& [stage, shards] : owners.shards()) {
    auto parameters = stages.at(stage).parameters;
    for (const OptimizerSharding::Shard& shard : shards)
      for (size_t owner = 0; owner < shard.names_by_owner.size(); ++owner) {
        if (shard.names_by_owner[owner].empty()) continue;
        OwnerTensors t;
        t.group = shard.group;
        t.owner = static_cast<int>(owner);
        t.mine = t.owner == shard.group->getRank();
        for (const auto& name : shard.names_by_owner[owner]) {
          t.parameters.push_back(parameters[name]);
          t.shapes.push_back(parameters[name].sizes().vec());
        }
        tensors_[stage].push_back(std::move(t));
      }
    whole_.insert(stage);
  }
}

void ParameterSharding::prefetch(int stage) {
  if (whole_.count(stage) || gathering_.count(stage) || !tensors_.count(stage)) return;
  runtime::UnmeteredMemory unmetered;
  for (OwnerTensors& t : tensors_.at(stage)) {
    int64_t numel = 0;
    for (const auto& shape : t.shapes) numel += c10::multiply_integers(shape);
    if (t.mine) {
      std::vector<torch::Tensor> flat;
      for (const auto& p : t.parameters) flat.push_back(p.detach().reshape({-1}));
      t.buffer = torch::cat(flat);
    } else {
      t.buffer = torch::empty({numel}, t.parameters.front().options().requires_grad(false));
    }
    std::vector<torch::Tensor> buffers = {t.buffer};
    traffic_->one_member(t.buffer.nbytes(), t.group->getSize());
    c10d::BroadcastOptions options;
    options.rootRank = t.owner;
    t.work = t.group->broadcast(buffers, options);
  }
  gathering_.insert(stage);
}

void ParameterSharding::wait(int stage) {
  if (whole_.count(stage) || !tensors_.count(stage)) return;
  prefetch(stage);
  runtime::UnmeteredMemory unmetered;
  torch::NoGradGuard no_grad;
  for (OwnerTensors& t : tensors_.at(stage)) {
    t.work->wait();
    t.work.reset();
    if (!t.mine) {  // the parameters become views of the message: no copy
      int64_t offset = 0;
      for (size_t i = 0; i < t.parameters.size(); ++i) {
        const int64_t numel = c10::multiply_integers(t.shapes[i]);
        t.parameters[i].set_data(t.buffer.narrow(0, offset, numel).view(t.shapes[i]));
        offset += numel;
      }
    }
    t.buffer = torch::Tensor();  // the owner's copy goes; the others' lives on in the views
  }
  gathering_.erase(stage);
  whole_.insert(stage);
}

void ParameterSharding::release(int stage) {
  if (!whole_.count(stage)) return;
  runtime::UnmeteredMemory unmetered;
  torch::NoGradGuard no_grad;
  for (OwnerTensors& t : tensors_.at(stage))
    if (!t.mine)
      for (auto& p : t.parameters) p.set_data(torch::empty({0}, p.options().requires_grad(false)));
  whole_.erase(stage);
}

void ParameterSharding::gather_all() {
  for (const auto& [stage, tensors] : tensors_) prefetch(stage);
  for (const auto& [stage, tensors] : tensors_) wait(stage);
}

void ParameterSharding::release_all() {
  for (const auto& [stage, tensors] : tensors_) release(stage);
}

}  // namespace dualpipe::parallel
