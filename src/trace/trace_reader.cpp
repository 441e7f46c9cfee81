// Reading the Chrome trace of docs/trace-format.md. Every field used is checked, and an error names the file
// and the JSON path of the field ("trace 'run.json': traceEvents[4].dur: expected a number, got \"x\"").
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "dualpipe/schedule/infer.h"
#include "dualpipe/schedule/schedule_file.h"
#include "dualpipe/schedule/schedule_limits.h"
#include "dualpipe/trace/json_syntax.h"
#include "dualpipe/trace/trace.h"
#include "dualpipe/util/byte_size.h"
#include "dualpipe/util/error.h"
#include "dualpipe/util/file_input.h"

namespace dualpipe {
namespace {

using nlohmann::json;

class FieldReader {
 public:
  explicit FieldReader(const std::string& source) : source_(source) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw InvalidArgument(detail::concat("trace '", source_, "': ", path, ": ", what));
  }

  std::string got(const json& value) const {
    // A container is described, not printed: dump() recurses once per level of nesting, so a deeply nested
    // file overflowed the stack (AddressSanitizer), and it copied all of a large value to show 40 characters.
    if (value.is_array()) return detail::concat("got an array of ", value.size(), " elements");
    if (value.is_object()) return detail::concat("got an object with ", value.size(), " fields");
    std::string text = value.dump();
    if (text.size() > 40) text = text.substr(0, 37) + "...";
    return "got " + text;
  }

  double number(const json& value, const std::string& path) const {
    if (!value.is_number()) fail(path, "expected a number, " + got(value));
    const double d = value.get<double>();
    if (!std::isfinite(d)) fail(path, "expected a finite number, " + got(value));
    return d;
  }

  int integer(const json& value, const std::string& path, int min) const {
    if (!value.is_number_integer()) fail(path, "expected an integer, " + got(value));
    const auto i = value.get<long long>();
    if (i < min || i > 1'000'000'000) fail(path, detail::concat("expected an integer >= ", min, ", ", got(value)));
    return static_cast<int>(i);
  }

  // A rank number or count: the readers' rank limit bounds what is kept per rank (docs/limits.md).
  int rank(const json& value, const std::string& path, int min, int limit) const {
    const int i = integer(value, path, min);
    if (i >= limit + min)
      fail(path, detail::concat("expected at most ", limit + min - 1, " (the limit of ", limit, " ranks), ", got(value)));
    return i;
  }

  std::string string(const json& value, const std::string& path) const {
    if (!value.is_string()) fail(path, "expected a string, " + got(value));
    return value.get<std::string>();
  }

 private:
  const std::string& source_;
};

void read_header(const json& header, const FieldReader& in, Trace& trace) {
  if (!header.is_object()) in.fail("dualpipe", "expected an object, " + in.got(header));
  if (header.contains("kind")) trace.kind = in.string(header["kind"], "dualpipe.kind");
  if (header.contains("ranks"))
    trace.num_ranks = in.rank(header["ranks"], "dualpipe.ranks", 1, ScheduleReadLimits{}.max_ranks);
  if (header.contains("stages")) trace.num_stages = in.integer(header["stages"], "dualpipe.stages", 1);
  if (header.contains("microbatches"))
    trace.num_microbatches = in.integer(header["microbatches"], "dualpipe.microbatches", 1);
  if (header.contains("schedule")) trace.schedule = in.string(header["schedule"], "dualpipe.schedule");
}

// The fields an action and a span share: start, duration, rank and step.
struct Placed {
  double start = 0, duration = 0;
  int rank = 0, step = 0;
  const json* args = nullptr;
};

Placed read_placed(const json& e, const std::string& path, const FieldReader& in) {
  Placed p;
  for (const char* field : {"ts", "dur"}) {
    if (!e.contains(field)) in.fail(path, detail::concat("missing field '", field, "' (microseconds)"));
  }
  p.start = in.number(e["ts"], path + ".ts");
  p.duration = in.number(e["dur"], path + ".dur");
  if (p.duration < 0) in.fail(path + ".dur", "a duration cannot be negative, " + in.got(e["dur"]));
  p.args = e.contains("args") ? &e["args"] : nullptr;
  if (p.args && !p.args->is_object()) in.fail(path + ".args", "expected an object, " + in.got(*p.args));
  const int max_ranks = ScheduleReadLimits{}.max_ranks;
  if (p.args && p.args->contains("rank")) p.rank = in.rank((*p.args)["rank"], path + ".args.rank", 0, max_ranks);
  else if (e.contains("pid")) p.rank = in.rank(e["pid"], path + ".pid", 0, max_ranks);
  else in.fail(path, "missing 'args.rank' and 'pid': the event names no rank");
  if (p.args && p.args->contains("step")) p.step = in.integer((*p.args)["step"], path + ".args.step", 0);
  return p;
}

TraceEvent read_event(const json& e, const std::string& path, const FieldReader& in) {
  TraceEvent ev;
  if (!e.contains("name")) in.fail(path, "missing field 'name' (the action, \"0F3\")");
  const std::string name = in.string(e["name"], path + ".name");
  try {
    ev.action = parse_action(name);
  } catch (const Error& err) {
    in.fail(path + ".name", err.what());
  }
  const Placed p = read_placed(e, path, in);
  ev.start = p.start, ev.duration = p.duration, ev.rank = p.rank, ev.step = p.step;
  if (p.args && p.args->contains("index")) ev.index = in.integer((*p.args)["index"], path + ".args.index", 0);
  else in.fail(path, "missing 'args.index' (the action's position in its rank's lowered list)");
  if (p.args->contains("bytes")) {
    ev.bytes = in.number((*p.args)["bytes"], path + ".args.bytes");
    if (ev.bytes < 0) in.fail(path + ".args.bytes", detail::concat("expected 0 or more bytes, got ", ev.bytes));
  }
  if (p.args->contains("completed")) {
    ev.completed = in.number((*p.args)["completed"], path + ".args.completed");
    if (ev.completed < 0)
      in.fail(path + ".args.completed", detail::concat("expected 0 or more microseconds, got ", ev.completed));
  }
  return ev;
}

constexpr std::size_t kMaxSpanName = 64;

TraceSpan read_span(const json& e, const std::string& path, const FieldReader& in) {
  TraceSpan span;
  if (!e.contains("name")) in.fail(path, "missing field 'name' (the exchange, \"dispatch\")");
  span.name = in.string(e["name"], path + ".name");
  if (span.name.size() > kMaxSpanName)
    in.fail(path + ".name", detail::concat("a span's name is at most ", kMaxSpanName, " characters, got ",
                                           span.name.size()));
  const Placed p = read_placed(e, path, in);
  span.start = p.start, span.duration = p.duration, span.rank = p.rank, span.step = p.step;
  if (!e.contains("tid")) in.fail(path, "missing field 'tid' (2 + the span's track)");
  const int tid = in.integer(e["tid"], path + ".tid", 2);
  if (tid > 3) in.fail(path + ".tid", "a span's tid is 2 or 3 (its track 0 or 1), " + in.got(e["tid"]));
  span.track = tid - 2;
  if (p.args && p.args->contains("waited")) {
    span.waited = in.number((*p.args)["waited"], path + ".args.waited");
    if (span.waited < 0 || span.waited > span.duration)
      in.fail(path + ".args.waited", "the wait for an exchange begins within its span: 0 <= waited <= dur, " +
                                         in.got((*p.args)["waited"]));
  }
  return span;
}

// A rank runs one compute action at a time (an overlapped pair is one action), so two of them that overlap in
// one step are a broken trace: taken as it is, its busy time exceeds its span (a bubble of -201.5% was printed).
// Rounding to whole nanoseconds may overlap neighbours by a nanosecond, which is allowed. `event_at[k]`:
// trace.events[k] is traceEvents[event_at[k]].
void check_compute_does_not_overlap(const Trace& trace, const std::vector<std::size_t>& event_at,
                                    const FieldReader& in) {
  constexpr double kRoundingUs = 0.002;
  std::map<std::pair<int, int>, std::vector<std::size_t>> by_rank_step;  // indices into trace.events
  for (std::size_t k = 0; k < trace.events.size(); ++k)
    if (trace.events[k].action.is_compute()) by_rank_step[{trace.events[k].rank, trace.events[k].step}].push_back(k);
  for (auto& [rank_step, ks] : by_rank_step) {
    std::sort(ks.begin(), ks.end(),
              [&](std::size_t a, std::size_t b) { return trace.events[a].start < trace.events[b].start; });
    for (std::size_t j = 1; j < ks.size(); ++j) {
      const TraceEvent &before = trace.events[ks[j - 1]], &after = trace.events[ks[j]];
      const double end = before.start + before.duration;
      if (after.start + kRoundingUs >= end) continue;
      in.fail(detail::concat("traceEvents[", event_at[ks[j]], "]"),
              detail::concat("'", to_string(after.action), "' of rank ", rank_step.first, " step ", rank_step.second,
                             " starts at ", after.start, " us, before '", to_string(before.action), "' (traceEvents[",
                             event_at[ks[j - 1]], "]) ends at ", end, " us: a rank's compute actions cannot overlap"));
    }
  }
}

}  // namespace

std::vector<int> Trace::steps() const {
  std::set<int> s;
  for (const TraceEvent& e : events) s.insert(e.step);
  return {s.begin(), s.end()};
}

std::vector<const TraceEvent*> step_compute_events(const Trace& trace, int step) {
  std::vector<const TraceEvent*> out;
  for (const TraceEvent& e : trace.events)
    if (e.step == step && e.action.is_compute()) out.push_back(&e);
  if (out.empty()) {
    std::string steps;
    for (int s : trace.steps()) steps += detail::concat(steps.empty() ? "" : ", ", s);
    throw InvalidArgument(detail::concat("the trace has no compute events for step ", step, " (steps recorded: ",
                                         steps.empty() ? "none" : steps, ")"));
  }
  return out;
}

Trace parse_trace(std::string_view text, const std::string& source) {
  const FieldReader in(source);
  DUALPIPE_REQUIRE(text.size() <= kMaxTraceBytes, "trace '", source, "' is ", text.size(),
                   " bytes, above the limit of ", kMaxTraceBytes, " bytes (", describe_bytes(kMaxTraceBytes), ")");
  json doc;
  try {
    // The depth is checked as the parser goes, before a deeply nested value is built.
    doc = json::parse(text.begin(), text.end(), [&](int depth, json::parse_event_t, json&) {
      if (depth > kMaxTraceDepth) {
        throw InvalidArgument(detail::concat("trace '", source, "' nests JSON values deeper than the limit of ",
                                             kMaxTraceDepth, " levels (a trace needs 4)"));
      }
      return true;
    });
  } catch (const json::exception& e) {
    throw InvalidArgument(
        detail::concat("trace '", source, "' is not valid JSON: ", json_syntax_problem(text, e.what())));
  }
  if (!doc.is_object()) in.fail("(top level)", "expected an object with 'traceEvents', " + in.got(doc));
  Trace trace;
  if (doc.contains("dualpipe")) read_header(doc["dualpipe"], in, trace);
  if (!doc.contains("traceEvents")) in.fail("traceEvents", "missing: a trace needs its list of events");
  const json& events = doc["traceEvents"];
  if (!events.is_array()) in.fail("traceEvents", "expected an array, " + in.got(events));
  std::map<std::tuple<int, int, int>, std::size_t> seen;  // (rank, step, index) -> position in traceEvents
  std::vector<std::vector<Action>> by_rank;                 // the events' actions per rank, for their numbers
  std::vector<std::vector<std::size_t>> positions;          // by_rank[r][k] is traceEvents[positions[r][k]]
  std::vector<std::size_t> event_at;                        // trace.events[k] is traceEvents[event_at[k]]
  for (std::size_t i = 0; i < events.size(); ++i) {
    const std::string path = detail::concat("traceEvents[", i, "]");
    const json& e = events[i];
    if (!e.is_object()) in.fail(path, "expected an object, " + in.got(e));
    // Only complete events ("X") are actions; metadata ("M") and anything else Perfetto allows is skipped.
    if (!e.contains("ph") || in.string(e["ph"], path + ".ph") != "X") continue;
    if (e.contains("cat") && e["cat"].is_string() && e["cat"].get_ref<const std::string&>() == kSpanCategory) {
      const TraceSpan& span = trace.spans.emplace_back(read_span(e, path, in));
      if (trace.num_ranks > 0 && span.rank >= trace.num_ranks) {
        in.fail(path + ".args.rank", detail::concat("rank ", span.rank, " is outside the ", trace.num_ranks,
                                                    " ranks of dualpipe.ranks"));
      }
      continue;
    }
    const TraceEvent& ev = trace.events.emplace_back(read_event(e, path, in));
    if (trace.num_ranks > 0 && ev.rank >= trace.num_ranks) {
      in.fail(path + ".args.rank", detail::concat("rank ", ev.rank, " is outside the ", trace.num_ranks,
                                                  " ranks of dualpipe.ranks"));
    }
    const Action& a = ev.action;
    const int top_stage = std::max(a.stage, a.bwd_stage), top_mb = std::max(a.microbatch, a.bwd_microbatch);
    if (trace.num_stages > 0 && top_stage >= trace.num_stages) {
      in.fail(path + ".name", detail::concat("stage ", top_stage, " of '", to_string(a), "' is outside the ",
                                             trace.num_stages, " stages of dualpipe.stages"));
    }
    if (trace.num_microbatches > 0 && top_mb >= trace.num_microbatches) {
      in.fail(path + ".name", detail::concat("micro-batch ", top_mb, " of '", to_string(a), "' is outside the ",
                                             trace.num_microbatches, " micro-batches of dualpipe.microbatches"));
    }
    const auto [it, fresh] = seen.emplace(std::make_tuple(ev.rank, ev.step, ev.index), i);
    if (!fresh) {
      in.fail(path, detail::concat("rank ", ev.rank, " step ", ev.step, " index ", ev.index, " ('", to_string(a),
                                   "') is recorded twice: traceEvents[", it->second, "] has the same rank, step and "
                                   "index"));
    }
    if (by_rank.size() <= static_cast<std::size_t>(ev.rank)) {
      by_rank.resize(static_cast<std::size_t>(ev.rank) + 1);
      positions.resize(by_rank.size());
    }
    by_rank[ev.rank].push_back(a);
    positions[ev.rank].push_back(i);
    event_at.push_back(i);
  }
  check_compute_does_not_overlap(trace, event_at, in);
  // Stage and micro-batch numbers are bounded as the schedule readers bound them (docs/limits.md), so what is
  // kept per stage (the fitted costs' per-stage scales) grows with the events, not with a number written in one:
  // fuzz_trace found a 190-byte trace whose forward '300000000F0' made draw --trace take 2.3 GB.
  try {
    check_action_indices(by_rank, [&](std::size_t rank, std::size_t k) {
      return detail::concat("traceEvents[", positions[rank][k], "]");
    }, false);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(detail::concat("trace '", source, "': ", e.what()));
  }
  return trace;
}

Trace read_trace(const std::string& path) {
  require_regular_file(path, "trace file '" + path + "'");
  return parse_trace(read_file_within(path, kMaxTraceBytes, "trace files"), path);
}

void check_trace_step(const Trace& trace, const Schedule& schedule, int step, const std::string& source) {
  auto require_count = [&](int header, int actual, const char* field) {
    DUALPIPE_REQUIRE(header == 0 || header == actual, "trace '", source, "': dualpipe.", field, " is ", header,
                     " but its dualpipe.schedule has ", actual);
  };
  require_count(trace.num_ranks, schedule.num_ranks, "ranks");
  require_count(trace.num_stages, schedule.num_stages, "stages");
  require_count(trace.num_microbatches, schedule.num_microbatches, "microbatches");
  // Per rank: how often the schedule runs each compute action, minus how often the step recorded it.
  std::vector<std::map<std::string, int>> balance(static_cast<std::size_t>(schedule.num_ranks));
  // The data-parallel actions too: a plan's UNSHARD, RESHARD and REDUCE_GRAD must each have run where it says.
  const auto planned = [](const Action& a) { return a.is_compute() || a.is_data_parallel(); };
  for (int r = 0; r < schedule.num_ranks; ++r)
    for (const Action& a : schedule.actions[r])
      if (planned(a)) ++balance[r][to_string(a)];
  for (const TraceEvent& e : trace.events) {
    if (e.step != step || !planned(e.action)) continue;
    DUALPIPE_REQUIRE(e.rank < schedule.num_ranks, "trace '", source, "': step ", step, " has an event of rank ",
                     e.rank, " but the schedule has ", schedule.num_ranks, " ranks");
    const std::string name = to_string(e.action);
    int& left = balance[e.rank][name];
    if (left == 0) {
      int runs = 0;
      for (const Action& a : schedule.actions[e.rank]) runs += planned(a) && to_string(a) == name;
      throw InvalidArgument(detail::concat("trace '", source, "': step ", step, " records '", name, "' on rank ",
                                           e.rank, " (index ", e.index, ") more often than the schedule runs it there (",
                                           runs, " time", runs == 1 ? "" : "s", ")"));
    }
    --left;
  }
  for (int r = 0; r < schedule.num_ranks; ++r) {
    for (const auto& [action, left] : balance[r]) {
      DUALPIPE_REQUIRE(left == 0, "trace '", source, "': step ", step, " has no event for '", action, "' on rank ",
                       r, ", which the schedule runs there (the step is incomplete)");
    }
  }
}

}  // namespace dualpipe
