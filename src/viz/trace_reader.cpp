// Reading the Chrome trace of docs/trace-format.md. Every field used is checked, and an error names the file
// and the JSON path of the field ("trace 'run.json': traceEvents[4].dur: expected a number, got \"x\"").
#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "dualpipe/error.h"
#include "dualpipe/trace.h"

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
  if (header.contains("ranks")) trace.num_ranks = in.integer(header["ranks"], "dualpipe.ranks", 1);
  if (header.contains("stages")) trace.num_stages = in.integer(header["stages"], "dualpipe.stages", 1);
  if (header.contains("microbatches"))
    trace.num_microbatches = in.integer(header["microbatches"], "dualpipe.microbatches", 1);
  if (header.contains("schedule")) trace.schedule = in.string(header["schedule"], "dualpipe.schedule");
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
  for (const char* field : {"ts", "dur"}) {
    if (!e.contains(field)) in.fail(path, detail::concat("missing field '", field, "' (microseconds)"));
  }
  ev.start = in.number(e["ts"], path + ".ts");
  ev.duration = in.number(e["dur"], path + ".dur");
  if (ev.duration < 0) in.fail(path + ".dur", "a duration cannot be negative, " + in.got(e["dur"]));
  const json* args = e.contains("args") ? &e["args"] : nullptr;
  if (args && !args->is_object()) in.fail(path + ".args", "expected an object, " + in.got(*args));
  if (args && args->contains("rank")) ev.rank = in.integer((*args)["rank"], path + ".args.rank", 0);
  else if (e.contains("pid")) ev.rank = in.integer(e["pid"], path + ".pid", 0);
  else in.fail(path, "missing 'args.rank' and 'pid': the event names no rank");
  if (args && args->contains("index")) ev.index = in.integer((*args)["index"], path + ".args.index", 0);
  else in.fail(path, "missing 'args.index' (the action's position in its rank's lowered list)");
  if (args && args->contains("step")) ev.step = in.integer((*args)["step"], path + ".args.step", 0);
  return ev;
}

}  // namespace

std::vector<int> Trace::steps() const {
  std::set<int> s;
  for (const TraceEvent& e : events) s.insert(e.step);
  return {s.begin(), s.end()};
}

Trace parse_trace(std::string_view text, const std::string& source) {
  const FieldReader in(source);
  json doc;
  try {
    doc = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    throw InvalidArgument(detail::concat("trace '", source, "' is not valid JSON: ", e.what()));
  }
  if (!doc.is_object()) in.fail("(top level)", "expected an object with 'traceEvents', " + in.got(doc));
  Trace trace;
  if (doc.contains("dualpipe")) read_header(doc["dualpipe"], in, trace);
  if (!doc.contains("traceEvents")) in.fail("traceEvents", "missing: a trace needs its list of events");
  const json& events = doc["traceEvents"];
  if (!events.is_array()) in.fail("traceEvents", "expected an array, " + in.got(events));
  for (std::size_t i = 0; i < events.size(); ++i) {
    const std::string path = detail::concat("traceEvents[", i, "]");
    const json& e = events[i];
    if (!e.is_object()) in.fail(path, "expected an object, " + in.got(e));
    // Only complete events ("X") are actions; metadata ("M") and anything else Perfetto allows is skipped.
    if (!e.contains("ph") || in.string(e["ph"], path + ".ph") != "X") continue;
    trace.events.push_back(read_event(e, path, in));
    if (trace.num_ranks > 0 && trace.events.back().rank >= trace.num_ranks) {
      in.fail(path + ".args.rank", detail::concat("rank ", trace.events.back().rank, " is outside the ",
                                                  trace.num_ranks, " ranks of dualpipe.ranks"));
    }
  }
  return trace;
}

Trace read_trace(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw InvalidArgument(detail::concat("cannot open trace file '", path, "'"));
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad()) throw InvalidArgument(detail::concat("cannot read trace file '", path, "'"));
  return parse_trace(text.str(), path);
}

}  // namespace dualpipe
