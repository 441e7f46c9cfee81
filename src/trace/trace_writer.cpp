// Writing the Chrome trace of docs/trace-format.md.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "dualpipe/schedule/text_format.h"
#include "dualpipe/trace/trace.h"
#include "dualpipe/util/atomic_file.h"
#include "dualpipe/util/error.h"

namespace dualpipe {

std::string format_trace(const Trace& trace) {
  using nlohmann::ordered_json;  // keeps the documented key order, so the file reads like the docs
  ordered_json doc;
  doc["displayTimeUnit"] = "ms";
  int num_ranks = trace.num_ranks;
  for (const TraceEvent& e : trace.events) num_ranks = std::max(num_ranks, e.rank + 1);
  doc["dualpipe"] = {{"kind", trace.kind},
                     {"ranks", num_ranks},
                     {"stages", trace.num_stages},
                     {"microbatches", trace.num_microbatches},
                     {"schedule", trace.schedule}};
  ordered_json events = ordered_json::array();
  for (int r = 0; r < num_ranks; ++r) {
    const std::string name = detail::concat("rank ", r);
    events.push_back({{"name", name}, {"ph", "M"}, {"pid", r}, {"tid", 0}, {"args", {{"name", name}}}});
  }
  for (const TraceEvent& e : trace.events) {
    const bool compute = e.action.is_compute();
    nlohmann::json args = {{"rank", e.rank}, {"index", e.index}, {"step", e.step}};
    if (e.bytes >= 0) args["bytes"] = e.bytes;
    if (e.completed >= 0) args["completed"] = e.completed;
    events.push_back({{"name", to_string(e.action)},
                      {"cat", compute ? "compute" : "comm"},
                      {"ph", "X"},
                      {"pid", e.rank},
                      {"tid", compute ? 0 : 1},
                      {"ts", e.start},
                      {"dur", e.duration},
                      {"args", std::move(args)}});
  }
  for (const TraceSpan& s : trace.spans) {
    events.push_back({{"name", s.name},
                      {"cat", kSpanCategory},
                      {"ph", "X"},
                      {"pid", s.rank},
                      {"tid", 2 + s.track},
                      {"ts", s.start},
                      {"dur", s.duration},
                      {"args", {{"rank", s.rank}, {"step", s.step}}}});
    if (s.waited > 0) events.back()["args"]["waited"] = s.waited;
  }
  doc["traceEvents"] = std::move(events);
  return doc.dump(1) + "\n";
}

void write_trace_file(const std::string& path, const Trace& trace) {
  write_file_atomically(path, format_trace(trace));
}

Trace trace_header(const Schedule& schedule) {
  Schedule compute = schedule;
  for (auto& actions : compute.actions) {
    actions.erase(std::remove_if(actions.begin(), actions.end(), [](const Action& a) { return a.is_communication(); }),
                  actions.end());
  }
  Trace trace;
  trace.kind = schedule.kind;
  trace.num_ranks = schedule.num_ranks;
  trace.num_stages = schedule.num_stages;
  trace.num_microbatches = schedule.num_microbatches;
  trace.schedule = format_text(compute);
  return trace;
}

}  // namespace dualpipe
