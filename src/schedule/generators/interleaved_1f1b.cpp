// Interleaved 1F1B (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters
// Using Megatron-LM"), in the order of Megatron-LM's forward_backward_pipelining_with_interleaving
// (megatron/core/pipeline_parallel/schedules.py).
//
// Every rank holds v model chunks; chunk c of rank r is stage c*R + r, so stage s runs on rank s mod R
// (Placement::looped). A rank walks M*v "virtual micro-batches" k = 0 .. M*v-1. Megatron's get_model_chunk_id
// cuts k into groups of R*v: within a group the first R virtual indices run chunk 0, the next R chunk 1, and
// so on, so a group of R micro-batches travels through all of the rank's chunks before the next group starts.
//   forward  k: chunk (k mod R*v) / R,             micro-batch (k / (R*v))*R + k mod R
//   backward k: chunk v-1 - (k mod R*v) / R,       same micro-batch (backwards start from the last chunk)
// Megatron keeps one FIFO per chunk; because groups are whole, the micro-batch formula above is exactly what
// those FIFOs hand out.
//
// Warm-up forwards on rank r: (R-r-1)*2 + (v-1)*R, capped at M*v; when M == R Megatron runs every forward
// first (its all_warmup_microbatches rule). Then forward w+k and backward k alternate, then the remaining
// backwards drain.
//
// v = 1 is plain 1F1B: Megatron never uses the interleaved function without virtual stages (it calls
// forward_backward_pipelining_without_interleaving), whose warm-up is R-r-1 and which takes any M.
#include <algorithm>

#include "generator_util.h"

namespace dualpipe {
namespace {

constexpr int kDefaultStagesPerRank = 2;
constexpr int kMaxStagesPerRank = 1024;

}  // namespace

Schedule make_interleaved_1f1b(const ScheduleOptions& o) {
  gen::require_basic("interleaved 1F1B", o);
  const int R = o.num_ranks, M = o.num_microbatches;
  const int v = o.stages_per_rank == 0 ? kDefaultStagesPerRank : o.stages_per_rank;
  DUALPIPE_REQUIRE(v >= 1 && v <= kMaxStagesPerRank, "interleaved 1F1B needs 1..", kMaxStagesPerRank,
                   " stages per rank, got ", o.stages_per_rank);
  // Groups of R micro-batches walk the chunks together, so M must split into whole groups.
  DUALPIPE_REQUIRE(v == 1 || M % R == 0,
                   "interleaved 1F1B needs M to be a multiple of R (micro-batch groups of R), got M=", M,
                   " for R=", R);

  Schedule s = gen::empty_schedule("interleaved-1f1b", R, v * R, M, Placement::looped(R, v));
  const int total = M * v;  // virtual micro-batches per rank
  const int group = R * v;
  auto chunk_of = [&](int k, bool forward) {
    const int c = (k % group) / R;
    return forward ? c : v - 1 - c;
  };
  auto microbatch_of = [&](int k) { return (k / group) * R + k % R; };

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
    auto forward = [&](int k) { out.push_back(Action::forward(chunk_of(k, true) * R + r, microbatch_of(k))); };
    auto backward = [&](int k) { out.push_back(Action::backward(chunk_of(k, false) * R + r, microbatch_of(k))); };

    for (int k = 0; k < warmup; ++k) forward(k);
    const int steady = total - warmup;
    for (int k = 0; k < steady; ++k) {  // one forward, one backward
      forward(warmup + k);
      backward(k);
    }
    for (int k = steady; k < total; ++k) backward(k);  // drain
  }
  return s;
}

}  // namespace dualpipe
