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

// The rank's link: the exchanges under way share it equally.
class SharedLink {
 public:
  // Starts an exchange of `work` at `now` (no earlier than the link's time); returns its id.
  int start(double work, double now);
  // Moves the link on to `time`, ending the exchanges that end by then.
  void advance(double time);
  // When exchange `id` ends (at the latest of now and its end), the link moved on to then.
  double end_of(int id);
  // When the next exchange under way ends, if nothing else starts; none under way: infinity.
  double next_end() const;
  bool ended(int id) const { return ended_.count(id) > 0; }

 private:
  struct Flow {
    int id;
    double left;
  };
  double least_left() const;
  void end_those_done();
  double now_ = 0;
  int next_id_ = 0;
  std::vector<Flow> under_way_;
  std::map<int, double> ended_;
};

}  // namespace dualpipe::pair_timing
