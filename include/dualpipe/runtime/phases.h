// An overlapped forward-backward interleaved phase by phase on one thread, as DeepSeek runs DualPipe's chunk pairs
// (DeepSeek-V3, section 3.2.1, and the profile of one pair in deepseek-ai/profile-data).
//
// Each MoE layer's forward runs as phases: attention (with the routing) ending by starting the dispatch, the experts
// ending by starting the combine, and the combine's sum, at the start of the next layer's attention. Its backward
// runs the other way, each phase's input gradients first and its parameter gradients (W) as a phase of their own.
// An exchange is started at the end of a phase and waited for at the start of the next phase of the same chain,
// where its result is first used: what runs between is the other micro-batch's compute. With one layer on each
// side the order is DeepSeek's,
//
//   combine(B) attn(F) mlp(B) mlp(W) mlp(F) attn(B) attn(W) combine(F)
//
// (the exchanges, under way between: the combine's gradient behind attn(F), the dispatch behind mlp(B) and mlp(W),
// the dispatch's gradient behind mlp(W) and mlp(F), the combine behind attn(B) and attn(W)). On a GPU the
// phases queue their kernels on the caller's stream and the exchanges run on the communicator's, so one host
// thread keeps both busy.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dualpipe/runtime/stage.h"

namespace dualpipe::runtime {

struct Phase {
  std::string name;  // "attn", "mlp", "combine" (forward), the same with " W" for parameter gradients
  std::function<void()> run;
  bool starts_exchange = false;  // ends with an exchange under way, which the chain's next phase waits for
  bool weight = false;           // parameter gradients only
};
using PhaseChain = std::vector<Phase>;

// Runs both chains here, in DeepSeek's order (schedule/phase_order.h): the backward's first; a chain keeps the turn
// until it has run a phase that starts an exchange and the weight phases after it, then the other chain has it.
// `ran`, if given, is told each phase's chain ('F' or 'B') and name as it starts.
void interleave_phases(PhaseChain backward, PhaseChain forward,
                       const std::function<void(char chain, const std::string& name)>& ran = nullptr);

// A stage that runs its forward and backward as phases, and its overlapped forward-backward interleaving them.
class PhasedStage : public Stage {
 public:
  // The forward of `inputs` as phases; `outputs` holds its outputs once the last one has run.
  virtual PhaseChain forward_phases(const Tensors& inputs, std::shared_ptr<Tensors> outputs) = 0;
  // `backward`, of this stage, as phases (it must have its roots: BackwardHalf::collect set); empty: this backward
  // cannot run as phases. A pair runs its backward half as phases of the half's own stage (BackwardHalf::owner),
  // when that is a PhasedStage too; else the forward, then backward.run().
  virtual PhaseChain backward_phases(const BackwardHalf& backward) = 0;

  Tensors forward(const Tensors& inputs) override;
  Tensors overlapped_forward_backward(const Tensors& inputs, const BackwardHalf& backward) override;
  // A lone backward runs its phases in their order too: each exchange is waited for where its result is first used,
  // so the parameter gradients between (the experts' W) compute while the dispatch's gradient is under way.
  void backward(const BackwardHalf& backward) override;

  // Told each phase of an interleaved pair or a lone backward as it starts (interleave_phases' `ran`).
  void observe_phases(std::function<void(char chain, const std::string& name)> observer) {
    observer_ = std::move(observer);
  }

 private:
  std::function<void(char, const std::string&)> observer_;
};

}  // namespace dualpipe::runtime
