// Megatron-LM's walk over "virtual micro-batches" on a rank holding v looped model chunks (internal; shared by
// interleaved 1F1B and combined 1F1B, which differ only in the warm-up and in pairing the steady F and B).
//
// A rank walks M*v virtual micro-batches k = 0 .. M*v-1, cut into groups of R*v (Megatron's get_model_chunk_id
// and get_schedule_table with microbatch_group_size_per_vp_stage = R): within a group the first R virtual indices
// run chunk 0, the next R chunk 1, and so on, so a group of R micro-batches travels through all of the rank's
// chunks before the next group starts.
//   forward  k: chunk (k mod R*v) / R,        micro-batch (k / (R*v))*R + k mod R
//   backward k: chunk v-1 - (k mod R*v) / R,  the same micro-batch (backwards start from the last chunk)
// Megatron keeps one FIFO per chunk; because groups are whole (M a multiple of R), the micro-batch formula above is
// exactly what those FIFOs hand out.
// Chunk c of rank r is stage c*R + r (Placement::looped).
#pragma once

#include "dualpipe/schedule/action.h"

namespace dualpipe::gen {

// Chunks per rank (--stages-per-rank) when none is asked for, and the most a looped schedule takes.
constexpr int kDefaultChunksPerRank = 2;
constexpr int kMaxChunksPerRank = 1024;

struct VirtualMicrobatches {
  int ranks = 1;            // R
  int chunks_per_rank = 1;  // v

  int total(int microbatches) const { return microbatches * chunks_per_rank; }
  Action forward(int rank, int k) const { return Action::forward(stage(rank, chunk(k, true)), microbatch(k)); }
  Action backward(int rank, int k) const { return Action::backward(stage(rank, chunk(k, false)), microbatch(k)); }

 private:
  int group() const { return ranks * chunks_per_rank; }
  int chunk(int k, bool forward) const {
    const int c = (k % group()) / ranks;
    return forward ? c : chunks_per_rank - 1 - c;
  }
  int microbatch(int k) const { return (k / group()) * ranks + k % ranks; }
  int stage(int rank, int chunk) const { return chunk * ranks + rank; }
};

}  // namespace dualpipe::gen
