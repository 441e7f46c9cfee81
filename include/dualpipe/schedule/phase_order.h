// The order in which an overlapped forward-backward pair runs its halves' phases (runtime/phases.h), shared by the
// runtime, which runs them, and the simulator, which times them (sim/phase_pair.h).
//
// DeepSeek's interleave: the backward's chain first; a chain keeps the turn until it has run a phase that starts an
// exchange and the weight-gradient phases after it, then the other chain has it; a chain that has ended leaves the
// other to its end. With one MoE layer on each side:
//
//   combine(B) attn(F) mlp(B) mlp(W) mlp(F) attn(B) attn(W) combine(F)
#pragma once

#include <cstddef>
#include <vector>

namespace dualpipe {

struct PhaseStep {
  bool starts_exchange = false;  // ends with an exchange under way, which the chain's next phase waits for
  bool weight = false;           // parameter gradients only
};

struct PhaseTurn {
  char chain;  // 'B' or 'F'
  size_t index;
};

std::vector<PhaseTurn> interleaved_phase_order(const std::vector<PhaseStep>& backward,
                                               const std::vector<PhaseStep>& forward);

}  // namespace dualpipe
