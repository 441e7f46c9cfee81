// Where each (stage, micro-batch) runs.
//
// Most schedules place a stage on one rank whatever the micro-batch. Two-direction schedules (DualPipe,
// Chimera) keep two replicas of every stage, and the micro-batch picks the replica (its direction).
#pragma once

#include <cstdint>
#include <vector>

namespace dualpipe {

class Placement {
 public:
  Placement() = default;

  // One replica: stage s runs on rank_of_stage[s].
  static Placement single(int num_ranks, std::vector<int> rank_of_stage);
  // Stage s on rank s (GPipe, 1F1B, Zero Bubble H1/H2).
  static Placement linear(int num_ranks);
  // v stages per rank, stage s on rank s mod R (interleaved 1F1B).
  static Placement looped(int num_ranks, int stages_per_rank);
  // 2R stages in a V: rank r holds stages r and 2R-1-r (DualPipeV, ZBV).
  static Placement v_shape(int num_ranks);
  // Two replicas: micro-batch m runs stage s on rank_of_stage[replica_of_microbatch[m]][s].
  static Placement two_directions(int num_ranks, std::vector<int> rank_of_stage_replica0,
                                  std::vector<int> rank_of_stage_replica1,
                                  std::vector<std::uint8_t> replica_of_microbatch);
  // DualPipe / Chimera: replica 0 places stage s on rank s, replica 1 on rank R-1-s (S = R).
  static Placement bidirectional(int num_ranks, std::vector<std::uint8_t> replica_of_microbatch);

  int rank(int stage, int microbatch) const {
    return rank_of_stage_[num_replicas() == 1 ? 0 : replica_of_microbatch_[microbatch]][stage];
  }
  int num_ranks() const { return num_ranks_; }
  int num_stages() const { return static_cast<int>(rank_of_stage_[0].size()); }
  int num_replicas() const { return rank_of_stage_[1].empty() ? 1 : 2; }
  // The replica (direction) a micro-batch takes; 0 for single placements.
  int replica(int microbatch) const { return num_replicas() == 1 ? 0 : replica_of_microbatch_[microbatch]; }
  int rank_of(int replica, int stage) const { return rank_of_stage_[replica][stage]; }
  // The distinct ranks holding a copy of `stage`, replica 0's first: one rank, or two for DualPipe and Chimera.
  std::vector<int> ranks_holding(int stage) const;
  bool holds(int rank, int stage) const;
  // Number of micro-batches the placement knows (two-direction placements only; 0 otherwise).
  int num_microbatches() const { return static_cast<int>(replica_of_microbatch_.size()); }

  // Stage modules (replicas counted separately) held by a rank: its parameter copies in stage units.
  int stages_held(int rank) const;
  // The same for every rank at once, in one pass over the stages (simulate's per-rank figures at R in the thousands).
  std::vector<int> stages_held_by_rank() const;

  friend bool operator==(const Placement& a, const Placement& b) {
    return a.num_ranks_ == b.num_ranks_ && a.rank_of_stage_[0] == b.rank_of_stage_[0] &&
           a.rank_of_stage_[1] == b.rank_of_stage_[1] &&
           a.replica_of_microbatch_ == b.replica_of_microbatch_;
  }

 private:
  int num_ranks_ = 0;
  std::vector<int> rank_of_stage_[2];  // [1] is empty for single-replica placements
  std::vector<std::uint8_t> replica_of_microbatch_;
};

}  // namespace dualpipe
