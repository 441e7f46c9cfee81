#include "dualpipe/schedule/placement.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "dualpipe/util/error.h"

namespace dualpipe {
namespace {

void check_ranks(int num_ranks, const std::vector<int>& rank_of_stage) {
  DUALPIPE_REQUIRE(num_ranks >= 1, "a placement needs at least one rank, got ", num_ranks);
  DUALPIPE_REQUIRE(!rank_of_stage.empty(), "a placement needs at least one stage");
  for (std::size_t s = 0; s < rank_of_stage.size(); ++s) {
    DUALPIPE_REQUIRE(rank_of_stage[s] >= 0 && rank_of_stage[s] < num_ranks, "stage ", s,
                     " is placed on rank ", rank_of_stage[s], ", outside 0..", num_ranks - 1);
  }
}

}  // namespace

Placement Placement::single(int num_ranks, std::vector<int> rank_of_stage) {
  check_ranks(num_ranks, rank_of_stage);
  Placement p;
  p.num_ranks_ = num_ranks;
  p.rank_of_stage_[0] = std::move(rank_of_stage);
  return p;
}

Placement Placement::linear(int num_ranks) {
  std::vector<int> ranks(static_cast<std::size_t>(std::max(num_ranks, 0)));
  std::iota(ranks.begin(), ranks.end(), 0);
  return single(num_ranks, std::move(ranks));
}

Placement Placement::looped(int num_ranks, int stages_per_rank) {
  DUALPIPE_REQUIRE(stages_per_rank >= 1, "stages per rank must be at least 1, got ", stages_per_rank);
  std::vector<int> ranks;
  for (int s = 0; s < num_ranks * stages_per_rank; ++s) ranks.push_back(s % num_ranks);
  return single(num_ranks, std::move(ranks));
}

Placement Placement::v_shape(int num_ranks) {
  std::vector<int> ranks;
  for (int s = 0; s < 2 * num_ranks; ++s) ranks.push_back(s < num_ranks ? s : 2 * num_ranks - 1 - s);
  return single(num_ranks, std::move(ranks));
}

Placement Placement::two_directions(int num_ranks, std::vector<int> rank_of_stage_replica0,
                                   std::vector<int> rank_of_stage_replica1,
                                   std::vector<std::uint8_t> replica_of_microbatch) {
  check_ranks(num_ranks, rank_of_stage_replica0);
  check_ranks(num_ranks, rank_of_stage_replica1);
  DUALPIPE_REQUIRE(rank_of_stage_replica0.size() == rank_of_stage_replica1.size(),
                   "both replicas must have the same number of stages, got ", rank_of_stage_replica0.size(),
                   " and ", rank_of_stage_replica1.size());
  for (std::size_t m = 0; m < replica_of_microbatch.size(); ++m) {
    DUALPIPE_REQUIRE(replica_of_microbatch[m] <= 1, "micro-batch ", m, " names replica ",
                     int(replica_of_microbatch[m]), "; only replicas 0 and 1 exist");
  }
  Placement p;
  p.num_ranks_ = num_ranks;
  p.rank_of_stage_[0] = std::move(rank_of_stage_replica0);
  p.rank_of_stage_[1] = std::move(rank_of_stage_replica1);
  p.replica_of_microbatch_ = std::move(replica_of_microbatch);
  return p;
}

Placement Placement::bidirectional(int num_ranks, std::vector<std::uint8_t> replica_of_microbatch) {
  std::vector<int> down, up;
  for (int s = 0; s < num_ranks; ++s) {
    down.push_back(s);
    up.push_back(num_ranks - 1 - s);
  }
  return two_directions(num_ranks, std::move(down), std::move(up), std::move(replica_of_microbatch));
}

int Placement::stages_held(int rank) const { return stages_held_by_rank()[rank]; }

std::vector<int> Placement::stages_held_by_rank() const {
  std::vector<int> held(num_ranks_, 0);  // each (replica, stage) is one stage module
  for (int replica = 0; replica < num_replicas(); ++replica)
    for (int s = 0; s < num_stages(); ++s) ++held[rank_of_stage_[replica][s]];
  return held;
}

std::vector<int> Placement::ranks_holding(int stage) const {
  std::vector<int> ranks;
  for (int replica = 0; replica < num_replicas(); ++replica)
    if (std::find(ranks.begin(), ranks.end(), rank_of(replica, stage)) == ranks.end())
      ranks.push_back(rank_of(replica, stage));
  return ranks;
}

bool Placement::holds(int rank, int stage) const {
  const std::vector<int> ranks = ranks_holding(stage);
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

}  // namespace dualpipe
