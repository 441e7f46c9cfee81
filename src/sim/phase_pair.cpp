#include "dualpipe/sim/phase_pair.h"

#include <algorithm>
#include <limits>
#include <map>
#include <vector>

#include "dualpipe/schedule/phase_order.h"

namespace dualpipe {
namespace {

struct TimedPhase {
  double compute = 0;
  double exchange = 0;  // started at the phase's end; 0: none
  bool weight = false;
};

std::vector<TimedPhase> forward_chain(double forward, double exchanges, int layers) {
  const double half = forward / (2 * layers), exchange = exchanges / (2 * layers);
  std::vector<TimedPhase> chain;
  for (int l = 0; l < layers; ++l) {
    chain.push_back({half, exchange});  // attention, then the dispatch
    chain.push_back({half, exchange});  // experts, then the combine
  }
  chain.push_back({0, 0});  // the last combine's sum
  return chain;
}

std::vector<TimedPhase> backward_chain(double input, double weight, double exchanges, int layers) {
  const double i = input / (2 * layers), w = weight / (2 * layers), exchange = exchanges / (2 * layers);
  std::vector<TimedPhase> chain;
  for (int l = layers - 1; l >= 0; --l) {
    chain.push_back({0, exchange});    // the combine's gradient, then its exchange
    chain.push_back({0, 0, true});     // (the head's parameter gradients: in W)
    chain.push_back({i, exchange});    // the experts' input gradient, then the dispatch's exchange
    chain.push_back({w, 0, true});     // their parameter gradient
    if (l > 0) {
      chain.push_back({i, 0});         // the attention's input gradient
      chain.push_back({w, 0, true});   // its parameter gradient
    } else {
      chain.push_back({i + w, 0});     // the rest of the stage, whole
    }
  }
  return chain;
}

// The rank's link: the exchanges under way share it equally.
class Link {
 public:
  int start(double work, double now) {
    advance(now);
    under_way_.push_back({next_id_, work});
    // One too small for the clock to tell its end from now ends now: end_of could not move the clock on to it.
    end_those_done();
    return next_id_++;
  }
  // Moves the link on to `time`, ending the exchanges that end by then.
  void advance(double time) {
    while (now_ < time) {
      if (under_way_.empty()) {
        now_ = time;
        return;
      }
      const double n = static_cast<double>(under_way_.size());
      const double step = std::min(least_left(), (time - now_) / n);
      now_ += step * n;
      for (Flow& f : under_way_) f.left -= step;
      end_those_done();
    }
  }
  // When exchange `id` ends (at the latest of now and its end), the link moved on to then.
  double end_of(int id) {
    while (!ended_.count(id)) advance(now_ + least_left() * static_cast<double>(under_way_.size()));
    return ended_.at(id);
  }

 private:
  struct Flow {
    int id;
    double left;
  };
  // The work left of the exchange under way that has the least.
  double least_left() const {
    return std::min_element(under_way_.begin(), under_way_.end(),
                            [](const Flow& a, const Flow& b) { return a.left < b.left; })->left;
  }
  void end_those_done() {
    for (auto it = under_way_.begin(); it != under_way_.end();) {
      if (it->left <= 1e-12 * (1 + now_)) {
        ended_[it->id] = now_;
        it = under_way_.erase(it);
      } else {
        ++it;
      }
    }
  }
  double now_ = 0;
  int next_id_ = 0;
  std::vector<Flow> under_way_;
  std::map<int, double> ended_;
};

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
  Link link;
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
