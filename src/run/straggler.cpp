#include "dualpipe/run/straggler.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "dualpipe/util/error.h"
#include "dualpipe/util/median.h"

namespace dualpipe::run {

const char* action_kind_name(int kind) {
  static const char* const names[kActionKinds] = {"F", "B", "I", "W", "FB"};
  return kind >= 0 && kind < kActionKinds ? names[kind] : "?";
}

SlowRank parse_slow_rank(const std::string& text, int ranks) {
  const auto fail = [&](const std::string& rule) {
    throw InvalidArgument("--emulate-slow-rank '" + text + "': " + rule);
  };
  const std::size_t eq = text.find('='), at = text.find('@');
  if (eq == std::string::npos || eq == 0) fail("must be RANK=FACTOR or RANK=FACTOR@STEP, like 2=1.5@5");
  const auto number = [&](const std::string& part, const char* what) {
    char* end = nullptr;
    const double value = part.empty() ? NAN : std::strtod(part.c_str(), &end);
    if (part.empty() || !end || *end != '\0' || !std::isfinite(value))
      fail(std::string(what) + " '" + part + "' is not a number");
    return value;
  };
  SlowRank slow;
  const double rank = number(text.substr(0, eq), "RANK");
  slow.factor = number(text.substr(eq + 1, at == std::string::npos ? std::string::npos : at - eq - 1), "FACTOR");
  const double step = at == std::string::npos ? 1 : number(text.substr(at + 1), "STEP");
  if (rank != std::floor(rank) || rank < 0 || rank >= ranks)
    fail(detail::concat("RANK must be a pipeline rank, 0 to ", ranks - 1));
  if (slow.factor < 1 || slow.factor > 100) fail("FACTOR must be between 1 and 100 (how many times as slow)");
  if (step != std::floor(step) || step < 1 || step > 1e7) fail("STEP must be a step number, 1 or more");
  slow.rank = static_cast<int>(rank), slow.from_step = static_cast<int>(step);
  return slow;
}

StragglerWatch::StragglerWatch(double threshold, int steps, std::vector<double> expected_speed)
    : threshold_(threshold), steps_(steps), expected_speed_(std::move(expected_speed)) {}

std::optional<Straggler> StragglerWatch::observe(int step, const std::vector<RankKindTimes>& ranks) {
  const int R = static_cast<int>(ranks.size());
  if (expected_speed_.empty()) expected_speed_.assign(R, 1.0);
  if (slow_since_.empty()) slow_since_.assign(R, 0), reported_.assign(R, false);
  DUALPIPE_CHECK(static_cast<int>(expected_speed_.size()) == R, "the straggler watch has speeds for ",
                 expected_speed_.size(), " ranks, the step ", R);
  // Each rank's time as if it ran at speed 1, over the median of the ranks that ran the kind.
  std::vector<std::array<double, kActionKinds>> ratio(R);
  for (int k = 0; k < kActionKinds; ++k) {
    std::vector<double> normal;
    for (int r = 0; r < R; ++r)
      if (ranks[r][k] > 0) normal.push_back(ranks[r][k] * expected_speed_[r]);
    if (normal.size() < 2) continue;  // nothing to compare with
    const double median = dualpipe::median(normal);
    for (int r = 0; r < R; ++r)
      ratio[r][k] = ranks[r][k] > 0 && median > 0 ? ranks[r][k] * expected_speed_[r] / median : 0;
  }
  measured_speed_.assign(R, 1.0);
  std::optional<Straggler> confirmed;
  for (int r = 0; r < R; ++r) {
    double sum = 0;
    int kinds = 0;
    for (const double x : ratio[r])
      if (x > 0) sum += x, ++kinds;
    const double slowdown = kinds > 0 ? sum / kinds : 1;
    measured_speed_[r] = expected_speed_[r] / slowdown;
    if (slowdown < threshold_) {
      slow_since_[r] = 0, reported_[r] = false;
      continue;
    }
    if (slow_since_[r] == 0) slow_since_[r] = step;
    if (reported_[r] || step - slow_since_[r] + 1 < steps_) continue;
    if (confirmed && confirmed->slowdown >= slowdown) continue;
    confirmed = Straggler{r, slow_since_[r], slowdown, ratio[r]};
  }
  if (confirmed) reported_[confirmed->rank] = true;
  return confirmed;
}

LayerCost layer_cost_of(const RankKindTimes& typical) {
  LayerCost layer;
  layer.forward = typical[0] > 0 ? typical[0] : typical[4];
  layer.weight = typical[3] > 0 ? typical[3] : 0;
  layer.backward = typical[1] > 0 ? typical[1] : typical[2] > 0 ? typical[2] + layer.weight : 2 * layer.forward;
  if (layer.weight <= 0) layer.weight = layer.backward / 2;
  layer.weight = std::min(layer.weight, layer.backward);
  return layer;
}

}  // namespace dualpipe::run
