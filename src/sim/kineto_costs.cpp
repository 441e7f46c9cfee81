#include "dualpipe/sim/kineto_costs.h"

#include <algorithm>
#include <tuple>

#include "dualpipe/util/error.h"

namespace dualpipe {

namespace {

const KinetoRegion* find_region(const KinetoSummary& summary, const std::string& name) {
  if (name.empty()) return nullptr;
  for (const KinetoRegion& r : summary.regions)
    if (r.name == name) return &r;
  return nullptr;
}

// The first 20 names, then how many more: a trace may hold thousands (an error listed 148 KB of them).
std::string region_list(const KinetoSummary& summary) {
  constexpr size_t kListed = 20;
  std::string names;
  for (size_t i = 0; i < std::min(kListed, summary.regions.size()); ++i)
    names += (i ? ", " : "") + summary.regions[i].name;
  if (summary.regions.size() > kListed) names += " and " + std::to_string(summary.regions.size() - kListed) + " more";
  return names.empty() ? "none" : names;
}

}  // namespace

KinetoCosts costs_from_kineto(const KinetoSummary& summary, const KinetoCostNames& names) {
  const KinetoRegion* forward = find_region(summary, names.forward);
  const KinetoRegion* backward = find_region(summary, names.backward);
  for (const auto& [region, option, name] : {std::tuple{forward, "--forward", names.forward},
                                            std::tuple{backward, "--backward", names.backward}}) {
    DUALPIPE_REQUIRE(region, "the trace has no region '", name, "' (", option,
                     "); its record_function regions: ", region_list(summary));
  }
  KinetoCosts out;
  CostModel& c = out.costs;
  c.forward = forward->median_duration;
  c.backward = backward->median_duration;
  if (const KinetoRegion* weight = find_region(summary, names.weight)) {
    // A split backward records its input-gradient part as the backward region and W apart: B = I + W.
    c.weight = weight->median_duration;
    c.backward += c.weight;
  } else {
    c.weight = c.backward / 2;
    out.warnings.push_back(names.weight.empty() ? "no weight region (--weight ''): W taken as half of B"
                                                : "no region '" + names.weight + "' (--weight): W taken as half of B");
  }
  if (const KinetoRegion* pair = find_region(summary, names.overlapped)) c.overlapped = pair->median_duration;
  if (const KinetoRegion* comm = find_region(summary, names.comm)) c.comm = comm->median_duration;
  c.check();
  return out;
}

}  // namespace dualpipe
