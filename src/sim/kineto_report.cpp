#include "dualpipe/sim/kineto_report.h"

#include <nlohmann/json.hpp>

#include "dualpipe/util/error.h"
#include "dualpipe/util/number_format.h"
#include "dualpipe/util/printable.h"

namespace dualpipe {

namespace {

double share(double part, double whole) { return whole > 0 ? part / whole : 0; }

const char* attribution_name(KinetoAttribution a) {
  switch (a) {
    case KinetoAttribution::Launches: return "launches";
    case KinetoAttribution::GpuRanges: return "gpu_ranges";
    case KinetoAttribution::Threads: return "threads";
  }
  return "?";
}

const char* attribution_text(KinetoAttribution a) {
  switch (a) {
    case KinetoAttribution::Launches:
      return "a region owns the GPU work launched inside it (correlation ids), wherever and whenever it ran";
    case KinetoAttribution::GpuRanges:
      return "no correlation ids: a region holds the GPU work that ran inside its GPU range";
    case KinetoAttribution::Threads:
      return "a region owns the operators run inside it on its thread";
  }
  return "";
}

}  // namespace

std::string kineto_table(const std::string& source, const KinetoTrace& trace, const KinetoSummary& summary,
                         const KinetoCosts* costs) {
  std::string text = "profiler trace " + source + ": " + std::to_string(summary.processes) +
                     (summary.processes == 1 ? " process" : " processes") +
                     (trace.has_gpu_kernels ? ", GPU kernels (the GPU's timeline is measured)"
                                            : ", CPU operators only (no GPU kernels)") + "\n";
  text += formatted(
      "whole trace: compute %.3f ms, communication %.3f ms, of which %.3f ms (%.0f%%) overlapped compute and "
      "%.3f ms was exposed\n",
      summary.compute / 1e3, summary.communication / 1e3, summary.overlapped / 1e3,
      100 * share(summary.overlapped, summary.communication), summary.exposed / 1e3);
  text += std::string("regions: ") + attribution_text(summary.attribution) + "\n\n";
  text += "region                            count   median ms    mean ms  compute ms  comm ms  comm overlapped\n";
  for (const KinetoRegion& r : summary.regions) {
    // A region's name is the traced program's: escaped (a terminal would act on its control characters), then cut.
    std::string name = printable_line(r.name);
    if (name.size() > 32) name = name.substr(0, 29) + "...";
    text += formatted("%-32s %6d %11.3f %10.3f %11.3f %8.3f %15.0f%%\n", name.c_str(), r.count, r.median_duration / 1e3,
                 r.mean_duration / 1e3, r.mean_compute / 1e3, r.mean_communication / 1e3,
                 100 * share(r.mean_overlapped, r.mean_communication));
  }
  if (summary.regions.empty()) text += "(no record_function regions)\n";
  text += summary.attribution == KinetoAttribution::GpuRanges
              ? "\ncompute and comm ms are means per occurrence of the time inside the region; comm overlapped is the "
                "share of it that ran\nwhile compute did (on another stream)\n"
              : "\ncompute and comm ms are means per occurrence of the region's own work, summed over its kernels or "
                "operators (its\nnested regions' included); comm overlapped is the share of it that ran while compute "
                "did (on another thread or stream)\n";
  text += formatted("\n%-34s %8s %12s %10s\n",
                    trace.has_gpu_kernels ? "stream (process/stream)" : "thread (process/thread)",
                    "events", "compute ms", "comm ms");
  constexpr std::size_t kStreamRows = 32;  // a trace may have thousands of threads: the JSON lists them all
  for (std::size_t i = 0; i < summary.streams.size() && i < kStreamRows; ++i) {
    const KinetoStream& st = summary.streams[i];
    text += formatted("%-34s %8d %12.3f %10.3f\n", (std::to_string(st.pid) + "/" + std::to_string(st.tid)).c_str(),
                      st.events, st.compute / 1e3, st.communication / 1e3);
  }
  if (summary.streams.size() > kStreamRows)
    text += formatted("(%zu more; --format json lists every one)\n", summary.streams.size() - kStreamRows);
  if (costs) text += "\n" + kineto_costs_text(*costs);
  return text;
}

namespace {

// "read from steps 1 and 2 of 0-3, ...": the steps the costs come from.
std::string steps_read_text(const KinetoCosts& costs) {
  std::string list;
  for (std::size_t i = 0; i < costs.steps_read.size(); ++i)
    list += detail::concat(i == 0 ? "" : i + 1 == costs.steps_read.size() ? " and " : ", ", costs.steps_read[i]);
  const bool one = costs.steps_read.size() == 1;
  return detail::concat("read from traced step", one ? " " : "s ", list, " of 0-", costs.steps_traced - 1, ": the ",
                        one ? "one that makes" : "two that make", " the slowest rank's median step (which leaves a "
                        "slow step's actions out)");
}

}  // namespace

std::string kineto_costs_text(const KinetoCosts& costs) {
  std::string text = "costs (microseconds, for --cost): " + costs.costs.to_string() + "\n";
  for (const KinetoCostSource& source : costs.sources) text += "  " + cost_source_text(source) + "\n";
  if (!costs.steps_read.empty()) text += "  " + steps_read_text(costs) + "\n";
  for (const std::string& w : costs.warnings) text += "note: " + w + "\n";
  return text;
}

nlohmann::ordered_json kineto_costs_json(const KinetoCosts* costs) {
  nlohmann::ordered_json out;
  out["costs_text"] = costs ? nlohmann::ordered_json(costs->costs.to_string()) : nlohmann::ordered_json();
  nlohmann::ordered_json sources = nlohmann::ordered_json::array();
  if (costs)
    for (const KinetoCostSource& s : costs->sources)
      sources.push_back({{"cost", s.cost}, {"value", s.value}, {"measure", s.measure}, {"regions", s.regions},
                         {"occurrences", s.occurrences}});
  out["cost_sources"] = sources;
  out["warnings"] = costs ? nlohmann::ordered_json(costs->warnings) : nlohmann::ordered_json::array();
  out["steps_read"] = costs ? nlohmann::ordered_json(costs->steps_read) : nlohmann::ordered_json::array();
  out["steps_traced"] = costs ? costs->steps_traced : 0;
  return out;
}

namespace {

// The summary's fields of the JSON, into `out`.
void summary_json(const KinetoSummary& summary, nlohmann::ordered_json& out) {
  out["attribution"] = attribution_name(summary.attribution);
  out["compute"] = summary.compute;
  out["communication"] = summary.communication;
  out["overlapped"] = summary.overlapped;
  out["exposed"] = summary.exposed;
  nlohmann::ordered_json regions = nlohmann::ordered_json::array();
  for (const KinetoRegion& r : summary.regions) {
    regions.push_back({{"name", r.name}, {"count", r.count}, {"median_duration", r.median_duration},
                       {"mean_duration", r.mean_duration}, {"durations", r.durations}, {"compute", r.mean_compute},
                       {"communication", r.mean_communication}, {"overlapped", r.mean_overlapped}});
  }
  out["regions"] = regions;
  nlohmann::ordered_json streams = nlohmann::ordered_json::array();
  for (const KinetoStream& st : summary.streams)
    streams.push_back({{"pid", st.pid}, {"tid", st.tid}, {"events", st.events}, {"compute", st.compute},
                       {"communication", st.communication}});
  out["streams"] = streams;
}

}  // namespace

std::string kineto_json(const std::string& source, const KinetoTrace& trace, const KinetoSummary& summary,
                        const KinetoCosts* costs) {
  nlohmann::ordered_json out;
  out["trace"] = source;
  out["processes"] = summary.processes;
  out["gpu_kernels"] = trace.has_gpu_kernels;
  out["time_unit"] = "us";
  summary_json(summary, out);
  out.update(kineto_costs_json(costs));
  return out.dump(2) + "\n";
}

std::string kineto_ranks_table(const KinetoRanks& ranks, const KinetoCosts* costs) {
  const std::string clocks = ranks.host.empty() ? std::string("clocks aligned on the collectives they share")
                                                : "one clock, host " + printable_line(ranks.host);
  std::string text = formatted("profiler traces of %zu ranks: %s, step is the median ProfilerStep (or the span of "
                               "the work)\n\n", ranks.ranks.size(), clocks.c_str());
  text += "rank  trace                                  offset ms  matched    step ms  compute ms  comm ms  "
          "exposed ms\n";
  for (const KinetoRankSummary& r : ranks.ranks) {
    std::string name = printable_line(r.source);
    if (name.size() > 38) name = "..." + name.substr(name.size() - 35);
    text += formatted("%-5d %-38s %10.3f %8d %10.3f %11.3f %8.3f %11.3f\n", r.rank, name.c_str(), r.clock_offset / 1e3,
                      r.collectives_matched, r.step / 1e3, r.summary.compute / 1e3, r.summary.communication / 1e3,
                      r.summary.exposed / 1e3);
  }
  if (!ranks.ranks.empty()) {
    const KinetoRankSummary& slow = ranks.ranks[ranks.slowest];
    text += formatted("\nslowest rank: %d (%s), step %.3f ms, %.1f%% above the median rank's %.3f ms\n", slow.rank,
                      printable_line(slow.source).c_str(), slow.step / 1e3,
                      100 * share(slow.step - ranks.median_step, ranks.median_step), ranks.median_step / 1e3);
  }
  if (costs) text += "\nevery rank's regions read together:\n" + kineto_costs_text(*costs);
  return text;
}

std::string kineto_ranks_json(const KinetoRanks& ranks, const KinetoCosts* costs) {
  nlohmann::ordered_json out;
  out["time_unit"] = "us";
  out["median_step"] = ranks.median_step;
  out["slowest_rank"] = ranks.ranks.empty() ? -1 : ranks.ranks[ranks.slowest].rank;
  out["one_host"] = ranks.host.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(ranks.host);
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const KinetoRankSummary& r : ranks.ranks) {
    nlohmann::ordered_json rank;
    rank["rank"] = r.rank;
    rank["trace"] = r.source;
    rank["clock_offset"] = r.clock_offset;
    rank["collectives_matched"] = r.collectives_matched;
    rank["step"] = r.step;
    rank["processes"] = r.summary.processes;
    summary_json(r.summary, rank);
    list.push_back(rank);
  }
  out["ranks"] = list;
  out.update(kineto_costs_json(costs));
  return out.dump(2) + "\n";
}

}  // namespace dualpipe
