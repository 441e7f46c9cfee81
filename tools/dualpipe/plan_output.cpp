#include "plan_output.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "dualpipe/util/byte_size.h"
#include "output.h"

namespace dualpipe::cli {

namespace {

double worst_peak(const Metrics& m) { return m.peak_activations(); }

const RankMetrics& worst_rank(const Metrics& m) {
  return *std::max_element(m.per_rank.begin(), m.per_rank.end(), [](const RankMetrics& a, const RankMetrics& b) {
    return a.peak_activations < b.peak_activations;
  });
}

std::string percent(double rate) { return fixed(100 * rate, 2) + "%"; }

}  // namespace

bool faster(const SimulatedSchedule& a, const SimulatedSchedule& b) {
  if (a.metrics.makespan != b.metrics.makespan) return a.metrics.makespan < b.metrics.makespan;
  if (worst_peak(a.metrics) != worst_peak(b.metrics)) return worst_peak(a.metrics) < worst_peak(b.metrics);
  return a.metrics.bubble_rate < b.metrics.bubble_rate;
}

std::string simulated_table(const SimulatedSchedule& r) {
  const CostModel& costs = r.costs;
  const Metrics& m = r.metrics;
  const Schedule& s = r.schedule;
  std::string out = s.kind + ": R=" + std::to_string(s.num_ranks) + " ranks, S=" + std::to_string(s.num_stages) +
                    " stages, M=" + std::to_string(s.num_microbatches) + " micro-batches, costs " +
                    costs.to_string() + "\n" + "step time (makespan) " + fixed(m.makespan, 2) +
                    "  largest idle (bubble) " + fixed(m.bubble, 2) + "  span bubble rate " +
                    percent(m.bubble_rate) + "  step bubble rate " + percent(m.step_bubble_rate) +
                    "  peak activations " + shortest_fixed(m.peak_activations()) + " stage activations\n\n";
  const bool bytes = costs.activation_bytes > 0;
  out += formatted("%4s  %12s  %12s  %12s  %24s  %6s  %6s%s\n", "rank", "busy", "idle", "span",
                "peak act (stage, model)", "chunks", "params", bytes ? "  peak act bytes" : "");
  for (const RankMetrics& rm : m.per_rank) {
    const std::string peak = shortest_fixed(rm.peak_activations) + " (" + fixed(rm.peak_activation_fraction, 2) +
                             " model)";
    out += formatted("%4d  %12s  %12s  %12s  %24s  %6d  %5sx", rm.rank, fixed(rm.busy, 2).c_str(),
                  fixed(rm.idle, 2).c_str(), fixed(rm.span, 2).c_str(), peak.c_str(), rm.stages_held,
                  shortest_fixed(rm.parameter_copies, 2).c_str());
    if (bytes) out += "  " + formatted("%14s", describe_bytes(rm.peak_activation_bytes).c_str());
    out += "\n";
  }
  return out;
}

std::string comparison_table(const std::vector<SimulatedSchedule>& results, const std::vector<SkippedKind>& skipped) {
  const bool bytes = !results.empty() && results.front().costs.activation_bytes > 0;
  // step time: the makespan; largest idle: the DualPipe paper's bubble; span rate: the Zero Bubble paper's
  // (max span - max busy) / max span; step rate: 1 - busy / (R x step time).
  std::string out = formatted("%-17s %3s %10s %12s %10s %10s %9s %9s %6s %6s%s\n", "schedule", "S", "step time",
                           "largest idle", "span rate", "step rate", "peak act", "act/model", "chunks", "params",
                           bytes ? "  peak act bytes" : "");
  for (const SimulatedSchedule& r : results) {
    const RankMetrics& worst = worst_rank(r.metrics);
    int held = 0;
    double copies = 0;
    for (const RankMetrics& rm : r.metrics.per_rank)
      held = std::max(held, rm.stages_held), copies = std::max(copies, rm.parameter_copies);
    out += formatted("%-17s %3d %10s %12s %10s %10s %9s %9s %6d %5sx", r.schedule.kind.c_str(), r.schedule.num_stages,
                  fixed(r.metrics.makespan, 2).c_str(), fixed(r.metrics.bubble, 2).c_str(),
                  percent(r.metrics.bubble_rate).c_str(), percent(r.metrics.step_bubble_rate).c_str(),
                  shortest_fixed(worst.peak_activations).c_str(), fixed(worst.peak_activation_fraction, 2).c_str(),
                  held, shortest_fixed(copies, 2).c_str());
    if (bytes) out += "  " + formatted("%14s", describe_bytes(worst.peak_activation_bytes).c_str());
    out += "\n";
  }
  if (!skipped.empty()) {
    out += "\nskipped:\n";
    for (const SkippedKind& s : skipped) out += "  " + s.kind + ": " + s.reason + "\n";
  }
  return out;
}

}  // namespace dualpipe::cli
