// Interleaved 1F1B (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters
// Using Megatron-LM"), in the order of Megatron-LM's forward_backward_pipelining_with_interleaving
// (megatron/core/pipeline_parallel/schedules.py). The walk over virtual micro-batches is virtual_microbatches.h.
//
// Warm-up forwards on rank r: (R-r-1)*2 + (v-1)*R, capped at M*v; when M == R Megatron runs every forward
// first (its all_warmup_microbatches rule). Then forward w+k and backward k alternate, then the remaining
// backwards drain.
//
// v = 1 is plain 1F1B: Megatron never uses the interleaved function without virtual stages (it calls
// forward_backward_pipelining_without_interleaving), whose warm-up is R-r-1 and which takes any M.
#include <algorithm>

#include "generator_util.h"
#include "virtual_microbatches.h"

namespace dualpipe {

Schedule make_interleaved_1f1b(const ScheduleOptions& o) {
  gen::require_basic("interleaved 1F1B", o);
  const int R = o.num_ranks, M = o.num_microbatches;
  const int v = o.stages_per_rank == 0 ? gen::kDefaultChunksPerRank : o.stages_per_rank;
  DUALPIPE_REQUIRE(v >= 1 && v <= gen::kMaxChunksPerRank, "interleaved 1F1B needs 1..", gen::kMaxChunksPerRank,
                   " stages per rank, got ", o.stages_per_rank);
  // Groups of R micro-batches walk the chunks together, so M must split into whole groups.
  DUALPIPE_REQUIRE(v == 1 || M % R == 0,
                   "interleaved 1F1B needs M to be a multiple of R (micro-batch groups of R), got M=", M,
                   " for R=", R);

  Schedule s = gen::empty_schedule("interleaved-1f1b", R, v * R, M, Placement::looped(R, v));
  const gen::VirtualMicrobatches walk{R, v};
  const int total = walk.total(M);
  for (int r = 0; r < R; ++r) {
    auto& out = s.actions[r];
    int warmup;
    if (v == 1) {
      warmup = std::min(R - r - 1, M);  // plain 1F1B
    } else if (M == R) {
      warmup = total;  // Megatron's all_warmup_microbatches: every forward, then every backward
    } else {
      warmup = std::min((R - r - 1) * 2 + (v - 1) * R, total);
    }
    for (int k = 0; k < warmup; ++k) out.push_back(walk.forward(r, k));
    for (int k = 0; k < total - warmup; ++k) {  // one forward, one backward
      out.push_back(walk.forward(r, warmup + k));
      out.push_back(walk.backward(r, k));
    }
    for (int k = total - warmup; k < total; ++k) out.push_back(walk.backward(r, k));  // drain
  }
  return s;
}

}  // namespace dualpipe
