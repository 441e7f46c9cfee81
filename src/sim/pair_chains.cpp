#include "pair_chains.h"

#include <algorithm>
#include <limits>

namespace dualpipe::pair_timing {

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

int SharedLink::start(double time, double now) {
  advance(now);
  const double latency = std::min(latency_, time);
  under_way_.push_back({next_id_, time - latency, latency});
  // One too small for the clock to tell its end from now ends now: end_of could not move the clock on to it.
  end_those_done();
  return next_id_++;
}

void SharedLink::advance(double time) {
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

double SharedLink::end_of(int id) {
  while (!ended(id)) advance(next_end());
  return ended_.at(id);
}

double SharedLink::next_end() const {
  if (under_way_.empty()) return std::numeric_limits<double>::infinity();
  return now_ + least_left() * static_cast<double>(under_way_.size());
}

double SharedLink::least_left() const {
  return std::min_element(under_way_.begin(), under_way_.end(),
                          [](const Flow& a, const Flow& b) { return a.left < b.left; })->left;
}

void SharedLink::end_those_done() {
  for (auto it = under_way_.begin(); it != under_way_.end();) {
    if (it->left <= 1e-12 * (1 + now_)) {
      ended_[it->id] = now_ + it->latency;
      it = under_way_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace dualpipe::pair_timing
