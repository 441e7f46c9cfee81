#include "plan_output.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

namespace dualpipe::cli {

nlohmann::ordered_json json_units(double value) {
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e15)
    return static_cast<long long>(value);
  return value;
}

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

nlohmann::ordered_json simulated_json(const SimulatedSchedule& r) {
  nlohmann::ordered_json per_rank = nlohmann::ordered_json::array();
  for (const RankMetrics& m : r.metrics.per_rank) {
    per_rank.push_back({{"rank", m.rank},
                        {"busy", m.busy},
                        {"idle", m.idle},
                        {"span", m.span},
                        {"peak_activations", json_units(m.peak_activations)},
                        {"peak_activation_fraction", m.peak_activation_fraction},
                        {"peak_activation_bytes", m.peak_activation_bytes},
                        {"parameter_copies", m.parameter_copies}});
  }
  return {{"kind", r.schedule.kind},
          {"ranks", r.schedule.num_ranks},
          {"stages", r.schedule.num_stages},
          {"microbatches", r.schedule.num_microbatches},
          {"costs", r.costs.to_string()},
          {"makespan", r.metrics.makespan},
          {"bubble", r.metrics.bubble},
          {"bubble_rate", r.metrics.bubble_rate},
          {"step_bubble_rate", r.metrics.step_bubble_rate},
          {"peak_activations", json_units(r.metrics.peak_activations())},
          {"per_rank", per_rank}};
}

void print_simulated(const SimulatedSchedule& r) {
  const CostModel& costs = r.costs;
  const Metrics& m = r.metrics;
  const Schedule& s = r.schedule;
  std::cout << s.kind << ": R=" << s.num_ranks << " ranks, S=" << s.num_stages << " stages, M="
            << s.num_microbatches << " micro-batches, costs " << costs.to_string() << "\n"
            << "step time (makespan) " << fixed(m.makespan, 2) << "  largest idle (bubble) " << fixed(m.bubble, 2)
            << "  span bubble rate " << percent(m.bubble_rate) << "  step bubble rate "
            << percent(m.step_bubble_rate) << "  peak activations " << shortest_fixed(m.peak_activations())
            << "\n\n";
  const bool bytes = costs.activation_bytes > 0;
  std::printf("%4s  %10s  %10s  %10s  %18s  %12s%s\n", "rank", "busy", "idle", "span", "peak activations",
              "stages held", bytes ? "  peak activation bytes" : "");
  for (const RankMetrics& rm : m.per_rank) {
    const std::string peak = shortest_fixed(rm.peak_activations) + " (" + fixed(rm.peak_activation_fraction, 2) +
                             " model)";
    std::printf("%4d  %10s  %10s  %10s  %18s  %12d", rm.rank, fixed(rm.busy, 2).c_str(), fixed(rm.idle, 2).c_str(),
                fixed(rm.span, 2).c_str(), peak.c_str(), rm.parameter_copies);
    if (bytes) std::printf("  %21.0f", rm.peak_activation_bytes);
    std::printf("\n");
  }
}

void print_comparison_table(const std::vector<SimulatedSchedule>& results, const std::vector<SkippedKind>& skipped) {
  const bool bytes = !results.empty() && results.front().costs.activation_bytes > 0;
  // step time: the makespan; largest idle: the DualPipe paper's bubble; span rate: the Zero Bubble paper's
  // (max span - max busy) / max span; step rate: 1 - busy / (R x step time).
  std::printf("%-17s %3s %10s %12s %10s %10s %9s %9s %12s%s\n", "schedule", "S", "step time", "largest idle",
              "span rate", "step rate", "peak act", "act/model", "stages held", bytes ? "  peak act bytes" : "");
  for (const SimulatedSchedule& r : results) {
    const RankMetrics& worst = worst_rank(r.metrics);
    int held = 0;
    for (const RankMetrics& rm : r.metrics.per_rank) held = std::max(held, rm.parameter_copies);
    std::printf("%-17s %3d %10s %12s %10s %10s %9s %9s %12d", r.schedule.kind.c_str(), r.schedule.num_stages,
                fixed(r.metrics.makespan, 2).c_str(), fixed(r.metrics.bubble, 2).c_str(),
                percent(r.metrics.bubble_rate).c_str(), percent(r.metrics.step_bubble_rate).c_str(),
                shortest_fixed(worst.peak_activations).c_str(), fixed(worst.peak_activation_fraction, 2).c_str(), held);
    if (bytes) std::printf("  %15.0f", worst.peak_activation_bytes);
    std::printf("\n");
  }
  if (!skipped.empty()) {
    std::cout << "\nskipped:\n";
    for (const SkippedKind& s : skipped) std::cout << "  " << s.kind << ": " << s.reason << "\n";
  }
}

}  // namespace dualpipe::cli
