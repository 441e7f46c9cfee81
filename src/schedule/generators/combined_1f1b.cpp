// Megatron-Core's combined 1F1B (its MoE all-to-all overlap, `--overlap-moe-expert-parallel-comm`): each steady
// forward runs as one unit with the backward beside it, layer by layer on two streams (attention/MLP on the compute
// stream, dispatch/combine on the communication stream), so one micro-batch's all-to-all hides behind the other's
// compute. Order as megatron/core/pipeline_parallel/schedules.py and combined_1f1b.py write it (NVIDIA/Megatron-LM
// at d98e8a6, 2026-08):
// - PP > 1 needs virtual stages (TransformerConfig asserts it); the walk is interleaved 1F1B's
//   (virtual_microbatches.h) with one more warm-up forward, "to ensure the forward and backward computations are
//   independent in all 1f1b steps" (get_pp_rank_microbatches): (R-r-1)*2 + (v-1)*R + 1, capped at M*v, and no
//   all-warm-up rule for M == R. Each steady step is the pair (forward w+k; backward k), then backwards drain.
// - PP = 1 (combined_1f1b_schedule_for_no_pipelining): F0, then (F i; B i-1) for i = 1..M-1, then B M-1.
#include <algorithm>

#include "generator_util.h"
#include "virtual_microbatches.h"

namespace dualpipe {

Schedule make_combined_1f1b(const ScheduleOptions& o) {
  gen::require_basic("combined 1F1B", o);
  const int R = o.num_ranks, M = o.num_microbatches;
  const int v = o.stages_per_rank != 0 ? o.stages_per_rank : R == 1 ? 1 : gen::kDefaultChunksPerRank;
  DUALPIPE_REQUIRE(R > 1 || v == 1, "combined 1F1B on 1 rank has no virtual stages (Megatron's no-pipelining "
                   "path); --stages-per-rank ", o.stages_per_rank, " does not apply");
  DUALPIPE_REQUIRE(R == 1 || (v >= 2 && v <= gen::kMaxChunksPerRank), "combined 1F1B on ", R,
                   " ranks needs 2..", gen::kMaxChunksPerRank,
                   " stages per rank (Megatron requires virtual stages for PP > 1), got ", o.stages_per_rank);
  DUALPIPE_REQUIRE(M % R == 0, "combined 1F1B needs M to be a multiple of R (micro-batch groups of R), got M=", M,
                   " for R=", R);

  Schedule s = gen::empty_schedule("combined-1f1b", R, v * R, M, Placement::looped(R, v));
  const gen::VirtualMicrobatches walk{R, v};
  const int total = walk.total(M);
  for (int r = 0; r < R; ++r) {
    auto& out = s.actions[r];
    const int warmup = std::min(R == 1 ? 1 : (R - r - 1) * 2 + (v - 1) * R + 1, total);
    for (int k = 0; k < warmup; ++k) out.push_back(walk.forward(r, k));
    for (int k = 0; k < total - warmup; ++k) {  // the forward beside the backward, as one unit
      const Action f = walk.forward(r, warmup + k), b = walk.backward(r, k);
      out.push_back(Action::overlapped(f.stage, f.microbatch, b.stage, b.microbatch));
    }
    for (int k = total - warmup; k < total; ++k) out.push_back(walk.backward(r, k));  // drain
  }
  return s;
}

}  // namespace dualpipe
