// Measured runs in the Chrome trace JSON of docs/trace-format.md: the runtime writes them, `dualpipe draw
// --trace` and `dualpipe compare` read them. Reading checks every field it uses and names the file and the field
// when one is wrong. The trace layer depends on the schedule alone: costs fitted to a trace are in
// sim/trace_costs.h, timelines of a trace in viz/trace_timeline.h.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "dualpipe/schedule/action.h"
#include "dualpipe/schedule/schedule.h"

namespace dualpipe {

// Bounds of the trace reader (docs/limits.md): the file, the nesting of its JSON, and its events.
constexpr std::size_t kMaxTraceBytes = std::size_t{64} << 20;  // 64 MiB, about 600,000 events
constexpr int kMaxTraceDepth = 32;                              // a trace needs 4 levels

struct TraceEvent {
  Action action;      // parsed from the event's name; a message's peer is not in the trace (-1)
  int rank = 0;       // args.rank (pid when absent)
  int index = 0;      // args.index: position in the rank's lowered action list
  int step = 0;       // args.step: the step as the program numbers it (dualpipe train: as it prints them, from 1)
  double start = 0;   // ts, microseconds
  double duration = 0;  // dur, microseconds
  // A REDUCE_GRAD's: args.bytes, the bytes of gradients it started reducing, so a trace shows each reduction ran
  // at its action; args.completed, microseconds from its start until that reduction completed (-1: absent).
  double bytes = -1;
  double completed = -1;
};

// A span on a track of its own beside the actions: the runtime writes a rank's expert all-to-alls (MoE stages)
// this way, on track 0 (exchanges of the thread running the schedule) and track 1 (of the backward half of an
// overlapped forward-backward), as events of category "all_to_all" on tid 2 + track.
constexpr const char* kSpanCategory = "all_to_all";

struct TraceSpan {
  std::string name;  // "dispatch", "combine backward", ...
  int rank = 0;
  int track = 0;
  int step = 0;
  double start = 0, duration = 0;  // microseconds
  // Microseconds from its start until the rank began to wait for it (args.waited): 0 when it waited at once, so
  // that the duration is the exchange's own; more when the rank computed meanwhile (the phases, runtime/phases.h)
  // and the span ends when the wait did.
  double waited = 0;
};

struct Trace {
  // The "dualpipe" object: the schedule that ran. Empty kind/schedule when the trace came without one.
  std::string kind;
  int num_ranks = 0;
  int num_stages = 0;
  int num_microbatches = 0;
  std::string schedule;  // canonical compute-only text form
  std::vector<TraceEvent> events;  // compute and communication events, in file order
  std::vector<TraceSpan> spans;    // all-to-alls, in file order

  // The steps recorded, ascending.
  std::vector<int> steps() const;
};

// The compute events of step `step`, in file order. Throws InvalidArgument listing the steps recorded when the
// step has none.
std::vector<const TraceEvent*> step_compute_events(const Trace& trace, int step);

// Parses trace JSON; `source` names it in errors ("trace 'run.json': traceEvents[4].dur: ..."). Strict: input
// above kMaxTraceBytes or nested deeper than kMaxTraceDepth, two events with the same rank, step and index,
// and ranks, stages or micro-batches outside the header's counts are errors naming the event.
Trace parse_trace(std::string_view json, const std::string& source);
// Reads a trace file; throws InvalidArgument naming the path when it cannot be read or parsed.
Trace read_trace(const std::string& path);

// The JSON text of a trace: the "dualpipe" object, one "M" event naming each rank, one "X" event per event
// (compute on tid 0, communication on tid 1), and the spans on tids 2 and up.
std::string format_trace(const Trace& trace);
// Writes format_trace through a temporary file and a rename, so a crash never leaves half a trace.
void write_trace_file(const std::string& path, const Trace& trace);

// Checks that step `step` of the trace holds, on every rank, exactly the compute and data-parallel actions
// `schedule` gives that rank (each once), and that the header's counts are the schedule's. Throws InvalidArgument
// naming the first rank and action that differ, so figures are never computed from a partial or padded step.
void check_trace_step(const Trace& trace, const Schedule& schedule, int step, const std::string& source);

// A trace of `schedule` without events: its kind, sizes and text form without messages (the communication actions
// of a lowered schedule are left out; data-parallel ones stay, as they are part of the plan).
Trace trace_header(const Schedule& schedule);

}  // namespace dualpipe
