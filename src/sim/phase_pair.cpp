#include "dualpipe/sim/phase_pair.h"

#include <algorithm>
#include <map>
#include <vector>

#include "dualpipe/schedule/phase_order.h"
#include "pair_chains.h"

namespace dualpipe {
namespace {

using pair_timing::backward_chain;
using pair_timing::forward_chain;
using pair_timing::SharedLink;
using pair_timing::TimedPhase;

std::vector<PhaseStep> steps(const std::vector<TimedPhase>& chain) {
  std::vector<PhaseStep> s;
  for (const TimedPhase& p : chain) s.push_back({p.exchange > 0, p.weight});
  return s;
}

}  // namespace

PairTiming time_phased_pair(const PairHalves& pair) {
  const std::vector<TimedPhase> backward =
      backward_chain(pair.input, pair.weight, pair.backward_exchanges, std::max(1, pair.backward_layers));
  const std::vector<TimedPhase> forward =
      forward_chain(pair.forward, pair.forward_exchanges, std::max(1, pair.forward_layers));
  SharedLink link(pair.exchange_latency);
  std::map<char, int> pending;  // chain -> the exchange its next phase waits for
  PairTiming timing;
  double now = 0;
  for (const PhaseTurn& turn : interleaved_phase_order(steps(backward), steps(forward))) {
    const TimedPhase& phase = (turn.chain == 'B' ? backward : forward)[turn.index];
    // A weight phase needs nothing from the exchange its chain started: the next phase that computes waits for it.
    if (const auto it = pending.find(turn.chain); it != pending.end() && !phase.weight) {
      link.advance(now);
      const double ready = link.end_of(it->second);
      timing.waiting += std::max(0.0, ready - now);
      now = std::max(now, ready);
      pending.erase(it);
    }
    now += phase.compute;
    if (phase.exchange > 0) pending[turn.chain] = link.start(phase.exchange, now);
  }
  timing.duration = now;
  return timing;
}

}  // namespace dualpipe
