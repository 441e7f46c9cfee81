// ZeRO's stages (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", 2020):
// what the data-parallel replicas shard, each stage adding to the one before. One type with its predicates, from the
// schedule's lowering (which adds ZeRO-3's UNSHARD/RESHARD) up to the trainer and the planner, instead of a number
// compared against 1, 2 and 3 wherever it matters.
#pragma once

#include <string>

namespace dualpipe {

enum class ZeroStage {
  None = 0,            // every replica holds the whole model state
  OptimizerState = 1,  // ZeRO-1: the optimizer's state sharded
  Gradients = 2,       // ZeRO-2: the gradients too, each reduced onto its owner alone
  Parameters = 3,      // ZeRO-3: the parameters too, gathered for a stage's actions of a step
};

constexpr bool shards_optimizer_state(ZeroStage z) { return z >= ZeroStage::OptimizerState; }
constexpr bool shards_gradients(ZeroStage z) { return z >= ZeroStage::Gradients; }
constexpr bool shards_parameters(ZeroStage z) { return z >= ZeroStage::Parameters; }
constexpr int number_of(ZeroStage z) { return static_cast<int>(z); }

// The stage numbered `number`, as --zero and a layout's zero= give it. Throws InvalidArgument naming `option` and
// the value outside 0..3 ("--zero must be 0, 1, 2 or 3, got 4").
ZeroStage zero_stage(int number, const std::string& option = "the ZeRO stage");

}  // namespace dualpipe
