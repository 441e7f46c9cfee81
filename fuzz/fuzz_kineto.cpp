// libFuzzer target: the PyTorch profiler trace reader (parse_kineto_trace), then what `dualpipe profile` does with
// an accepted trace: the regions' split into compute, communication and overlap (GPU work owned through its
// launches' correlation ids, issue 49), the table and JSON of it, the costs of its regions and the events that
// made them, and `plan --from-kineto`'s reading of the run (the schedule the trace names, simulated).
#include <cstdint>
#include <string_view>

#include "dualpipe/sim/kineto_costs.h"
#include "dualpipe/sim/kineto_plan.h"
#include "dualpipe/sim/kineto_report.h"
#include "dualpipe/trace/kineto.h"
#include "dualpipe/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const dualpipe::KinetoTrace trace = dualpipe::parse_kineto_trace(text, "fuzz.json");
    const dualpipe::KinetoSummary summary = dualpipe::summarize_kineto(trace);
    // Both forms of the report (regions by ownership, streams, exposed communication), then the costs.
    (void)dualpipe::kineto_table("fuzz.json", trace, summary, nullptr);
    (void)dualpipe::kineto_json("fuzz.json", trace, summary, nullptr);
    const dualpipe::KinetoCosts costs = dualpipe::costs_from_kineto(summary, dualpipe::KinetoCostNames{});
    (void)dualpipe::kineto_table("fuzz.json", trace, summary, &costs);
    (void)dualpipe::kineto_json("fuzz.json", trace, summary, &costs);
    dualpipe::KinetoRanks ranks;
    dualpipe::KinetoRankSummary& rank = ranks.ranks.emplace_back();
    rank.source = "fuzz.json";
    rank.schedule = trace.schedule;
    rank.schedule_kind = trace.schedule_kind;
    rank.summary = summary;
    (void)dualpipe::read_kineto_run(ranks, dualpipe::KinetoCostNames{});
    (void)dualpipe::read_kineto_run(ranks, dualpipe::KinetoCostNames{}, 2);  // as plan -r 2 reads unnamed runs
  } catch (const dualpipe::Error&) {
  }
  return 0;
}
