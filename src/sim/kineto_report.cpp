#include "dualpipe/sim/kineto_report.h"

#include <nlohmann/json.hpp>

#include "dualpipe/util/number_format.h"
#include "dualpipe/util/printable.h"

namespace dualpipe {

namespace {

double share(double part, double whole) { return whole > 0 ? part / whole : 0; }

}  // namespace

std::string kineto_table(const std::string& source, const KinetoTrace& trace, const KinetoSummary& summary,
                         const KinetoCosts* costs) {
  std::string text = "profiler trace " + source + ": " + std::to_string(summary.processes) +
                     (summary.processes == 1 ? " process" : " processes") +
                     (trace.has_gpu_kernels ? ", GPU kernels (the GPU's timeline is measured)"
                                            : ", CPU operators only (no GPU kernels)") + "\n";
  text += formatted(
      "whole trace: compute %.3f ms, communication %.3f ms, of which %.3f ms (%.0f%%) overlapped compute\n\n",
      summary.compute / 1e3, summary.communication / 1e3, summary.overlapped / 1e3,
      100 * share(summary.overlapped, summary.communication));
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
  text += "\ncompute and comm ms are means per occurrence of the time inside the region; comm overlapped is the share "
          "of it that ran\nwhile compute did (on another thread or stream)\n";
  if (costs) {
    text += "\ncosts (microseconds, for --cost): " + costs->costs.to_string() + "\n";
    for (const std::string& w : costs->warnings) text += "note: " + w + "\n";
  }
  return text;
}

std::string kineto_json(const std::string& source, const KinetoTrace& trace, const KinetoSummary& summary,
                        const KinetoCosts* costs) {
  nlohmann::ordered_json out;
  out["trace"] = source;
  out["processes"] = summary.processes;
  out["gpu_kernels"] = trace.has_gpu_kernels;
  out["time_unit"] = "us";
  out["compute"] = summary.compute;
  out["communication"] = summary.communication;
  out["overlapped"] = summary.overlapped;
  nlohmann::ordered_json regions = nlohmann::ordered_json::array();
  for (const KinetoRegion& r : summary.regions) {
    regions.push_back({{"name", r.name},
                       {"count", r.count},
                       {"median_duration", r.median_duration},
                       {"mean_duration", r.mean_duration},
                       {"durations", r.durations},
                       {"compute", r.mean_compute},
                       {"communication", r.mean_communication},
                       {"overlapped", r.mean_overlapped}});
  }
  out["regions"] = regions;
  out["costs_text"] = costs ? nlohmann::ordered_json(costs->costs.to_string()) : nlohmann::ordered_json();
  out["warnings"] = costs ? nlohmann::ordered_json(costs->warnings) : nlohmann::ordered_json::array();
  return out.dump(2) + "\n";
}

}  // namespace dualpipe
