// A slow pipeline rank (a throttled GPU, a bad link, a noisy neighbour), as `dualpipe train` finds it: each step,
// every rank's compute time per layer for each kind of action it ran; a rank whose time stays at least a threshold
// over the median of the ranks running the same kind, for a number of steps in a row, is a straggler. The figures
// are normalised by the speeds the cut was made for (a re-planned run expects its slow rank to be slow).
// docs/train.md, "Stragglers". LibTorch-free.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "dualpipe/sim/layer_partition.h"

namespace dualpipe::run {

// The kinds of compute action a rank runs: F, B (full backward), I, W, and DualPipe's overlapped F&B pair.
constexpr int kActionKinds = 5;
const char* action_kind_name(int kind);  // "F", "B", "I", "W", "FB"

// One rank's step: for each kind, its compute milliseconds per layer of the stages it ran them for (an F&B pair
// counts its forward's layers and twice its backward's, the backward being about twice the forward); -1 where it
// ran none of that kind.
using RankKindTimes = std::array<double, kActionKinds>;

struct Straggler {
  int rank = -1;
  int since_step = 0;                      // the first step of the run of slow steps
  double slowdown = 1;                     // over the median, the mean over the kinds it ran
  std::array<double, kActionKinds> per_kind{};  // its time over the median per kind; 0 where it ran none
};

// "RANK=FACTOR[@STEP]" of --emulate-slow-rank, checked against `ranks`; throws InvalidArgument naming the option.
struct SlowRank {
  int rank = -1;
  double factor = 1;
  int from_step = 1;
};
SlowRank parse_slow_rank(const std::string& text, int ranks);

class StragglerWatch {
 public:
  // expected_speed: per pipeline rank, what the cut was made for (empty: all 1).
  StragglerWatch(double threshold, int steps, std::vector<double> expected_speed);

  // One step's figures of every pipeline rank. Returns the straggler on the step it is confirmed (`steps` slow
  // steps in a row), once; the slowest rank where two are.
  std::optional<Straggler> observe(int step, const std::vector<RankKindTimes>& ranks);

  // Each rank's speed as the last step measured it: expected speed over its slowdown against the median.
  const std::vector<double>& measured_speed() const { return measured_speed_; }

 private:
  double threshold_;
  int steps_;
  std::vector<double> expected_speed_, measured_speed_;
  std::vector<int> slow_since_;      // first step of each rank's run of slow steps; 0: not slow
  std::vector<bool> reported_;
};

// One layer's F, B and W from `typical`, each kind's typical time per layer (0 where no rank ran the kind): an F&B
// pair stands for F; B is I + W where the run split it; W is half of B where it did not, and never above B (each
// kind's typical time comes from other actions, which a noisy machine can leave with W over B).
LayerCost layer_cost_of(const RankKindTimes& typical);

}  // namespace dualpipe::run
