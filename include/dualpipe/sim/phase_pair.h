// An overlapped forward-backward pair timed phase by phase, as the runtime runs it (runtime/phases.h): each half a
// chain of compute phases with the expert exchanges between them, interleaved in DeepSeek's order
// (schedule/phase_order.h), computing one phase at a time, the exchanges sharing the rank's link.
//
// The chains are the transformer's MoE layers' (models/gpt.h), L of them a stage. Forward, per layer: the attention
// (half of the layer's F) ending with the dispatch's start, the experts (the other half) ending with the combine's
// start; the last combine's sum ends the chain. Backward, per layer from the top: the combine's gradient (no
// compute) ending with its exchange's start, the experts' input gradient (half of I) ending with the dispatch's,
// their parameter gradient (half of W), the attention's input gradient (half of I), its parameter gradient (half of
// W; the lowest layer's runs with its input gradient). Each exchange carries a2a / (2 L), the forward's and the
// backward's alike. A phase waits for its chain's last exchange, unless it computes parameter gradients only.
// Exchanges under way at once share the link equally (each at half its speed while both are under way), all but
// their latency: an exchange's bytes first, then its latency, which the others do not slow.
#pragma once

namespace dualpipe {

struct PairHalves {
  double forward = 0, forward_exchanges = 0;  // the forward half's stage: F and a2a
  int forward_layers = 1;
  double input = 0, weight = 0, backward_exchanges = 0;  // the backward half's stage: I = B - W, W and a2a
  int backward_layers = 1;
  double exchange_latency = 0;  // of each exchange, a2a_latency (sim/cost_model.h): not shared with the others
};

struct PairTiming {
  double duration = 0;
  double waiting = 0;  // time no phase computed because its chain waited for an exchange: the exposed all-to-all
};

PairTiming time_phased_pair(const PairHalves& pair);

// The same pair with its halves on two threads (`dualpipe train --fb-overlap-mode threads`): each half runs its
// chain on its own, waiting for each of its exchanges where it starts it, the backward in autograd's order (each
// parameter gradient with the input gradient before it, ahead of the exchange that follows); the two share one
// device, which goes to the half that has waited for it longest (the backward first), and the rank's link.
PairTiming time_threaded_pair(const PairHalves& pair);

}  // namespace dualpipe
