// What the two timings of an overlapped pair share (sim/phase_pair.h): the halves' chains of phases, and the rank's
// link, which the exchanges under way share.
#pragma once

#include <map>
#include <vector>

namespace dualpipe::pair_timing {

struct TimedPhase {
  double compute = 0;
  double exchange = 0;  // started at the phase's end; 0: none
  bool weight = false;  // parameter gradients only
};

// The forward's chain, per layer: the attention, ending with the dispatch's start; the experts, ending with the
// combine's; then the last combine's sum.
std::vector<TimedPhase> forward_chain(double forward, double exchanges, int layers);
// The backward's chain as the phases split it, per layer from the top: the combine's gradient (no compute) with its
// exchange, the experts' input gradient with the dispatch's, their parameter gradient, the attention's input
// gradient and its parameter gradient (the lowest layer's run whole).
std::vector<TimedPhase> backward_chain(double input, double weight, double exchanges, int layers);

// The rank's link: the exchanges under way share it equally. An exchange is its bytes on the link and then its
// latency (what of it is not the link's: the peer's start, the transport's round trips), which is not shared.
class SharedLink {
 public:
  // `latency`: of each exchange, at most its whole time.
  explicit SharedLink(double latency = 0) : latency_(latency) {}
  // Starts an exchange taking `time` alone at `now` (no earlier than the link's time); returns its id.
  int start(double time, double now);
  // Moves the link on to `time`, ending the bytes of the exchanges whose bytes end by then.
  void advance(double time);
  // When exchange `id` ends, the link moved on to the end of its bytes.
  double end_of(int id);
  // When the next exchange under way ends its bytes, if nothing else starts; none under way: infinity.
  double next_end() const;
  // Whether the end of exchange `id` is known: its bytes have ended.
  bool ended(int id) const { return ended_.count(id) > 0; }

 private:
  struct Flow {
    int id;
    double left;     // of its bytes' time
    double latency;  // after them
  };
  double least_left() const;
  void end_those_done();
  double latency_;
  double now_ = 0;
  int next_id_ = 0;
  std::vector<Flow> under_way_;
  std::map<int, double> ended_;
};

}  // namespace dualpipe::pair_timing
