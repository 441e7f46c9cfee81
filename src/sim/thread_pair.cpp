#include <algorithm>
#include <limits>
#include <vector>

#include "dualpipe/sim/phase_pair.h"
#include "pair_chains.h"

namespace dualpipe {
namespace {

using pair_timing::TimedPhase;

// Autograd's order, as a backward on a thread of its own runs: each parameter gradient computes with the input
// gradient before it, ahead of the exchange that follows.
std::vector<TimedPhase> in_autograd_order(const std::vector<TimedPhase>& chain) {
  std::vector<TimedPhase> merged;
  for (const TimedPhase& phase : chain) {
    if (phase.weight && !merged.empty()) {
      merged.back().compute += phase.compute;
    } else {
      merged.push_back(phase);
    }
  }
  return merged;
}

// One half on its thread: the phase it runs next, and what it waits for before asking for the device.
struct Half {
  std::vector<TimedPhase> phases;
  size_t next = 0;
  double ready = 0;   // when its last exchange ended (or its last phase did, if it exchanged nothing)
  int exchange = -1;  // the exchange it waits for; -1: none

  bool wants_device() const { return exchange < 0 && next < phases.size(); }
};

}  // namespace

PairTiming time_threaded_pair(const PairHalves& pair) {
  Half backward{in_autograd_order(pair_timing::backward_chain(pair.input, pair.weight, pair.backward_exchanges,
                                                              std::max(1, pair.backward_layers)))};
  Half forward{pair_timing::forward_chain(pair.forward, pair.forward_exchanges, std::max(1, pair.forward_layers))};
  pair_timing::SharedLink link(pair.exchange_latency);
  double device_free = 0, computed = 0;
  while (true) {
    for (Half* h : {&backward, &forward}) {
      if (h->exchange >= 0 && link.ended(h->exchange)) {
        h->ready = link.end_of(h->exchange);
        h->exchange = -1;
      }
    }
    if (!backward.wants_device() && !forward.wants_device() && backward.exchange < 0 && forward.exchange < 0) break;
    // The device goes to the half that has waited for it longest (the backward on a tie).
    Half* next = nullptr;
    for (Half* h : {&backward, &forward})
      if (h->wants_device() && (next == nullptr || h->ready < next->ready)) next = h;
    const double start = next ? std::max(next->ready, device_free) : std::numeric_limits<double>::infinity();
    // An exchange that ends first may make its half the one that has waited longest. (With no half wanting the
    // device, one waits for an exchange under way: this ends it.)
    if (link.next_end() <= start) {
      link.advance(link.next_end());
      continue;
    }
    const TimedPhase& phase = next->phases[next->next++];
    device_free = start + phase.compute;
    computed += phase.compute;
    next->ready = device_free;
    if (phase.exchange > 0) next->exchange = link.start(phase.exchange, device_free);
  }
  return {device_free, device_free - computed};
}

}  // namespace dualpipe
