#include "dualpipe/infer.h"

#include <algorithm>
#include <utility>

#include "dualpipe/error.h"

namespace dualpipe {
namespace {

// Visits the (stage, micro-batch) of a compute action that runs a forward.
template <typename Fn>
void for_each_forward(const Action& a, Fn&& fn) {
  if (a.type == ActionType::Forward || a.type == ActionType::Overlapped) fn(a.stage, a.microbatch);
}

template <typename Fn>
void for_each_stage_microbatch(const Action& a, Fn&& fn) {
  fn(a.stage, a.microbatch);
  if (a.type == ActionType::Overlapped) fn(a.bwd_stage, a.bwd_microbatch);
}

// Rank of every (stage, micro-batch) that has a forward; -1 where none does.
std::vector<std::vector<int>> forward_ranks(const std::vector<std::vector<Action>>& actions, int num_stages,
                                            int num_microbatches) {
  std::vector<std::vector<int>> rank(num_stages, std::vector<int>(num_microbatches, -1));
  for (int r = 0; r < static_cast<int>(actions.size()); ++r) {
    for (const Action& a : actions[r]) {
      for_each_forward(a, [&](int s, int m) {
        if (rank[s][m] < 0) rank[s][m] = r;
      });
    }
  }
  return rank;
}

Placement infer_placement(const std::vector<std::vector<int>>& rank, int num_ranks, int num_microbatches) {
  const int num_stages = static_cast<int>(rank.size());
  // A micro-batch's replica is decided by where its first stage runs: the rank micro-batch 0 uses is
  // replica 0, any other rank replica 1.
  const int home = rank[0][0];
  std::vector<std::uint8_t> replica(num_microbatches, 0);
  bool two = false;
  for (int m = 0; m < num_microbatches; ++m) {
    if (rank[0][m] >= 0 && rank[0][m] != home) {
      replica[m] = 1;
      two = true;
    }
  }
  std::vector<int> rank_of[2] = {std::vector<int>(num_stages, -1), std::vector<int>(num_stages, -1)};
  for (int s = 0; s < num_stages; ++s) {
    for (int m = 0; m < num_microbatches; ++m) {
      const int r = rank[s][m];
      if (r < 0) continue;  // missing forward: the validator reports it
      int& slot = rank_of[replica[m]][s];
      if (slot < 0) slot = r;
      if (slot != r) {
        throw InvalidSchedule(detail::concat(
            "cannot infer a placement: stage ", s, " runs on rank ", slot, " for some micro-batches and on rank ",
            r, " for micro-batch ", m, " of the same direction (a stage may have at most two replicas, and a "
            "micro-batch keeps one direction through all stages)"));
      }
    }
  }
  // Stages never run (a broken file) are put on rank 0 so the validator can report the missing actions.
  for (auto& ranks : rank_of) std::replace(ranks.begin(), ranks.end(), -1, 0);
  if (!two) return Placement::single(num_ranks, rank_of[0]);
  return Placement::two_directions(num_ranks, rank_of[0], rank_of[1], std::move(replica));
}

}  // namespace

Schedule schedule_from_actions(std::vector<std::vector<Action>> actions) {
  DUALPIPE_REQUIRE(!actions.empty(), "a schedule needs at least one rank");
  int max_stage = -1, max_microbatch = -1;
  for (const auto& rank_actions : actions) {
    for (const Action& a : rank_actions) {
      for_each_stage_microbatch(a, [&](int s, int m) {
        max_stage = std::max(max_stage, s);
        max_microbatch = std::max(max_microbatch, m);
      });
    }
  }
  DUALPIPE_REQUIRE(max_stage >= 0, "the schedule holds no actions");

  Schedule schedule;
  schedule.kind = "custom";
  schedule.num_ranks = static_cast<int>(actions.size());
  schedule.num_stages = max_stage + 1;
  schedule.num_microbatches = max_microbatch + 1;
  const auto ranks = forward_ranks(actions, schedule.num_stages, schedule.num_microbatches);
  DUALPIPE_REQUIRE(ranks[0][0] >= 0, "the schedule has no forward 0F0, so its placement cannot be inferred");
  schedule.placement = infer_placement(ranks, schedule.num_ranks, schedule.num_microbatches);

  // Communication peers follow from the placement.
  const Placement& p = schedule.placement;
  for (auto& rank_actions : actions) {
    for (Action& a : rank_actions) {
      switch (a.type) {
        case ActionType::SendForward:
          if (a.stage + 1 < schedule.num_stages) a.peer = p.rank(a.stage + 1, a.microbatch);
          break;
        case ActionType::RecvForward:
          if (a.stage > 0) a.peer = p.rank(a.stage - 1, a.microbatch);
          break;
        case ActionType::SendBackward:
          if (a.stage > 0) a.peer = p.rank(a.stage - 1, a.microbatch);
          break;
        case ActionType::RecvBackward:
          if (a.stage + 1 < schedule.num_stages) a.peer = p.rank(a.stage + 1, a.microbatch);
          break;
        default:
          break;
      }
    }
  }
  schedule.actions = std::move(actions);
  return schedule;
}

}  // namespace dualpipe
