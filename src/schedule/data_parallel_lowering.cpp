#include "dualpipe/schedule/data_parallel_lowering.h"

#include <map>
#include <vector>

#include "dualpipe/util/error.h"

namespace dualpipe {
namespace {

// The stages a compute action computes with, and the stages it adds gradients to.
std::vector<int> stages_used(const Action& a) {
  if (a.type == ActionType::Overlapped) return {a.stage, a.bwd_stage};
  return {a.stage};
}
std::vector<int> stages_with_gradients(const Action& a) {
  if (a.type == ActionType::Overlapped) return {a.bwd_stage};
  if (a.type == ActionType::Forward) return {};
  return {a.stage};
}

void require_no_data_parallel(const Schedule& schedule, const char* pass) {
  const std::string found = first_data_parallel_action(schedule);
  DUALPIPE_REQUIRE(found.empty(), pass, " takes a schedule without data-parallel actions; this one holds ", found);
}

// `schedule` with every rank's actions rebuilt by `lower(rank, actions, out)`.
template <typename Lower>
Schedule rebuilt(const Schedule& schedule, Lower&& lower) {
  Schedule out = schedule;
  for (std::size_t r = 0; r < schedule.actions.size(); ++r) {
    out.actions[r].clear();
    lower(schedule.actions[r], out.actions[r]);
  }
  return out;
}

}  // namespace

Schedule add_unshard_reshard(const Schedule& schedule) {
  require_no_data_parallel(schedule, "add_unshard_reshard");
  return rebuilt(schedule, [](const std::vector<Action>& actions, std::vector<Action>& out) {
    std::map<std::size_t, std::vector<int>> unshard_before, reshard_after;  // action index -> stages
    std::map<int, std::size_t> last_use;
    std::size_t previous_compute = actions.size();  // none yet
    for (std::size_t i = 0; i < actions.size(); ++i) {
      if (!actions[i].is_compute()) continue;
      for (int stage : stages_used(actions[i])) {
        if (!last_use.count(stage))
          unshard_before[previous_compute == actions.size() ? i : previous_compute].push_back(stage);
        last_use[stage] = i;
      }
      previous_compute = i;
    }
    for (const auto& [stage, i] : last_use) reshard_after[i].push_back(stage);
    for (std::size_t i = 0; i < actions.size(); ++i) {
      if (auto it = unshard_before.find(i); it != unshard_before.end())
        for (int stage : it->second) out.push_back(Action::data_parallel(ActionType::Unshard, stage));
      out.push_back(actions[i]);
      if (auto it = reshard_after.find(i); it != reshard_after.end())
        for (int stage : it->second) out.push_back(Action::data_parallel(ActionType::Reshard, stage));
    }
  });
}

Schedule add_reduce_grad(const Schedule& schedule, ReduceAt at) {
  for (const auto& actions : schedule.actions)
    for (const Action& a : actions)
      DUALPIPE_REQUIRE(a.type != ActionType::ReduceGrad, "add_reduce_grad takes a schedule without REDUCE_GRAD "
                       "actions; this one holds ", to_string(a));
  return rebuilt(schedule, [at](const std::vector<Action>& actions, std::vector<Action>& out) {
    std::map<int, std::size_t> last_gradient;
    for (std::size_t i = 0; i < actions.size(); ++i)
      if (actions[i].is_compute())
        for (int stage : stages_with_gradients(actions[i])) last_gradient[stage] = i;
    std::map<std::size_t, std::vector<int>> reduce_after;  // in the order the stages' gradients are done
    for (const auto& [stage, i] : last_gradient) reduce_after[i].push_back(stage);
    std::vector<Action> at_end;
    for (std::size_t i = 0; i < actions.size(); ++i) {
      out.push_back(actions[i]);
      if (auto it = reduce_after.find(i); it != reduce_after.end())
        for (int stage : it->second)
          (at == ReduceAt::LastGradient ? out : at_end).push_back(Action::data_parallel(ActionType::ReduceGrad, stage));
    }
    out.insert(out.end(), at_end.begin(), at_end.end());
  });
}

Schedule add_data_parallel_actions(const Schedule& schedule, int replicas, ZeroStage zero, bool overlap_reduction) {
  DUALPIPE_REQUIRE(replicas >= 1, "data-parallel replicas must be at least 1, got ", replicas);
  DUALPIPE_REQUIRE(zero == ZeroStage::None || replicas > 1, "ZeRO-", number_of(zero),
                   " shards over the data-parallel replicas and needs at least 2, got ", replicas);
  if (replicas == 1) return schedule;
  const Schedule sharded = shards_parameters(zero) ? add_unshard_reshard(schedule) : schedule;
  return add_reduce_grad(sharded, overlap_reduction ? ReduceAt::LastGradient : ReduceAt::StepEnd);
}

std::string first_data_parallel_action(const Schedule& schedule) {
  for (std::size_t r = 0; r < schedule.actions.size(); ++r)
    for (const Action& a : schedule.actions[r])
      if (a.is_data_parallel()) return to_string(a) + " on rank " + std::to_string(r);
  return "";
}

}  // namespace dualpipe
