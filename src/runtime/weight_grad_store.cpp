#include "dualpipe/runtime/weight_grad_store.h"

#include "dualpipe/util/error.h"

namespace dualpipe::runtime {
namespace {
thread_local WeightGradStore* current_store = nullptr;
}

void WeightGradStore::begin_deferring(int stage, int microbatch) {
  DUALPIPE_CHECK(!deferring_, "nested deferral");
  deferring_ = true;
  key_ = {stage, microbatch};
}

void WeightGradStore::end_deferring() {
  deferring_ = false;
  key_ = {-1, -1};
}

void WeightGradStore::defer(Task task) {
  DUALPIPE_CHECK(deferring_, "weight-gradient work deferred outside an I action");
  groups_[key_].push_back(std::move(task));
}

void WeightGradStore::add(int stage, int microbatch, Task task) {
  groups_[{stage, microbatch}].push_back(std::move(task));
}

void WeightGradStore::run(int stage, int microbatch) {
  auto it = groups_.find({stage, microbatch});
  if (it == groups_.end()) return;  // the stage has no split-aware layers: dW was computed during I
  std::vector<Task> tasks = std::move(it->second);
  groups_.erase(it);
  for (auto& task : tasks) task();
}

void WeightGradStore::clear() {
  groups_.clear();
  end_deferring();
}

WeightGradStore* WeightGradStore::current() { return current_store; }

WeightGradStore::Scope::Scope(WeightGradStore* store) : previous_(current_store) { current_store = store; }
WeightGradStore::Scope::~Scope() { current_store = previous_; }

}  // namespace dualpipe::runtime
