#include "dualpipe/schedule/infer.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "dualpipe/util/error.h"

namespace dualpipe {
namespace {

// Visits the (stage, micro-batch) of a compute action that runs a forward.
template <typename Fn>
void for_each_forward(const Action& a, Fn&& fn) {
  if (a.type == ActionType::Forward || a.type == ActionType::Overlapped) fn(a.stage, a.microbatch);
}

// A data-parallel action names a stage only: it is visited with micro-batch 0, which every schedule names anyway.
template <typename Fn>
void for_each_stage_microbatch(const Action& a, Fn&& fn) {
  fn(a.stage, a.is_data_parallel() ? 0 : a.microbatch);
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

// The first index above a gap in `uses` (indices no action uses), with the gap; false when there is none.
bool find_gap(const std::vector<int>& sorted_distinct, int& gap_begin, int& gap_end, int& above) {
  int expected = 0;
  for (int v : sorted_distinct) {
    if (v != expected) {
      gap_begin = expected, gap_end = v - 1, above = v;
      return true;
    }
    ++expected;
  }
  return false;
}

std::string range_text(int begin, int end) {
  return begin == end ? std::to_string(begin) : detail::concat(begin, "..", end);
}

}  // namespace

void check_action_indices(const std::vector<std::vector<Action>>& actions, const ActionLocator& where,
                          bool contiguous) {
  std::vector<int> stages, microbatches;
  std::int64_t uses = 0;  // (stage, micro-batch) pairs named by the actions
  for (const auto& rank_actions : actions) {
    for (const Action& a : rank_actions) {
      for_each_stage_microbatch(a, [&](int s, int m) {
        stages.push_back(s);
        microbatches.push_back(m);
      });
      ++uses;
      if (a.type == ActionType::Overlapped) ++uses;
    }
  }
  auto distinct = [](std::vector<int>& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  };
  distinct(stages);
  distinct(microbatches);
  auto first_using = [&](bool stage, int value) -> std::pair<std::size_t, std::size_t> {
    for (std::size_t r = 0; r < actions.size(); ++r) {
      for (std::size_t i = 0; i < actions[r].size(); ++i) {
        const Action& a = actions[r][i];
        bool hit = false;
        for_each_stage_microbatch(a, [&](int s, int m) { hit = hit || (stage ? s : m) == value; });
        if (hit) return {r, i};
      }
    }
    return {0, 0};
  };
  int begin = 0, end = 0, above = 0;
  for (const bool stage : {true, false}) {
    if (!contiguous) break;
    if (!find_gap(stage ? stages : microbatches, begin, end, above)) continue;
    const auto [r, i] = first_using(stage, above);
    const char* noun = stage ? "stage" : "micro-batch";
    const char* plural = stage ? "stages" : "micro-batches";
    const std::string in_use =
        begin == 0 ? detail::concat("(", plural, " are counted from 0)")
                   : detail::concat("(the ", plural, " in use below it are 0..", begin - 1, ")");
    throw InvalidArgument(detail::concat(noun, " ", above, " of '", to_string(actions[r][i]), "' (", where(r, i),
                                         ") is out of range: no action uses ", begin == end ? noun : plural, " ",
                                         range_text(begin, end), " ", in_use));
  }
  if (stages.empty()) return;
  const std::int64_t num_stages = stages.back() + std::int64_t{1}, num_microbatches = microbatches.back() + std::int64_t{1};
  const std::int64_t needed = num_stages * num_microbatches;
  // A complete schedule names every (stage, micro-batch) at least twice (forward and backward); far fewer means
  // most of it is missing, and reporting every missing action would take work the input's size does not bound.
  if (needed <= 4 * uses + 4096) return;
  // Name the action holding the number furthest above the others: the likely typo.
  const bool by_stage = static_cast<double>(num_stages) / static_cast<double>(stages.size()) >
                        static_cast<double>(num_microbatches) / static_cast<double>(microbatches.size());
  const auto [r, i] = first_using(by_stage, by_stage ? stages.back() : microbatches.back());
  throw InvalidArgument(detail::concat(
      by_stage ? "stage " : "micro-batch ", by_stage ? stages.back() : microbatches.back(), " of '",
      to_string(actions[r][i]), "' (", where(r, i), ") is out of range: stages 0..", num_stages - 1,
      " and micro-batches 0..", num_microbatches - 1, " make ", needed, " (stage, micro-batch) pairs, each needing a "
      "forward and a backward, but the actions name only ", uses, " (at most 4 x ", uses, " + 4096 pairs are read)"));
}

Schedule schedule_from_actions(std::vector<std::vector<Action>> actions) {
  DUALPIPE_REQUIRE(!actions.empty(), "a schedule needs at least one rank");
  check_action_indices(actions, [](std::size_t rank, std::size_t index) {
    return detail::concat("rank ", rank, " action ", index + 1);
  }, false);
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
