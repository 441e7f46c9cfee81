#include <algorithm>
#include <cctype>
#include <cmath>

#include <nlohmann/json.hpp>

#include "dualpipe/trace/kineto.h"
#include "dualpipe/util/byte_size.h"
#include "dualpipe/util/error.h"
#include "dualpipe/util/file_input.h"

namespace dualpipe {

namespace {

using json = nlohmann::json;

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

[[noreturn]] void fail(const std::string& source, const std::string& path, const std::string& what) {
  throw InvalidArgument(detail::concat("profiler trace '", source, "': ", path, ": ", what));
}

double finite_number(const json& e, const char* key, const std::string& source, const std::string& path) {
  const auto it = e.find(key);
  if (it == e.end() || !it->is_number()) fail(source, path + "." + key, "expected a number");
  const double value = it->get<double>();
  if (!std::isfinite(value)) fail(source, path + "." + key, "expected a finite number");
  return value;
}

// pid and tid are integers, or strings for device tracks ("Spans", "stream 7"): hashed to a number.
long long track_id(const json& e, const char* key, const std::string& source, const std::string& path) {
  const auto it = e.find(key);
  if (it == e.end()) fail(source, path + "." + key, "missing");
  if (it->is_number_integer()) return it->get<long long>();
  if (it->is_string()) return static_cast<long long>(std::hash<std::string>{}(it->get<std::string>()) >> 1);
  fail(source, path + "." + key, "expected an integer or a string");
}

}  // namespace

bool is_library_communication_name(std::string_view name) {
  const std::string n = lower(name);
  for (const char* prefix : {"nccl", "gloo:", "c10d::", "record_param_comms"})
    if (n.rfind(prefix, 0) == 0) return true;
  return false;
}

bool is_communication_name(std::string_view name) {
  if (is_library_communication_name(name)) return true;
  const std::string n = lower(name);
  for (const char* part : {"all_reduce", "allreduce", "all_gather", "allgather", "reduce_scatter", "reducescatter",
                           "all_to_all", "alltoall", "broadcast", "sendrecv"})
    if (n.find(part) != std::string::npos) return true;
  return n == "send" || n == "recv" || n.rfind("send_", 0) == 0 || n.rfind("recv_", 0) == 0;
}

namespace {

// One element of traceEvents: appended to `trace` when it is a complete event of a category used.
void add_event(const json& e, const std::string& source, std::size_t index, KinetoTrace& trace) {
  const std::string path = detail::concat("traceEvents[", index, "]");
  if (!e.is_object()) fail(source, path, "expected an object");
  const auto ph = e.find("ph"), cat = e.find("cat");
  if (ph == e.end() || !ph->is_string() || *ph != "X" || cat == e.end() || !cat->is_string()) return;
  const std::string& category = cat->get_ref<const std::string&>();
  const bool region = category == "user_annotation" || category == "gpu_user_annotation";
  if (!region && category != "cpu_op" && category != "kernel") return;
  KinetoEvent event;
  const auto name = e.find("name");
  if (name == e.end() || !name->is_string()) fail(source, path + ".name", "expected a string");
  event.name = name->get<std::string>();
  if (event.name.size() > 4096) fail(source, path + ".name", "longer than 4096 characters");
  event.gpu = category == "kernel" || category == "gpu_user_annotation";
  // A program's own region may be called "allreduce"; the libraries' annotations carry their prefix.
  const bool communication = region ? is_library_communication_name(event.name) : is_communication_name(event.name);
  event.kind = communication ? KinetoKind::Communication : region ? KinetoKind::Region : KinetoKind::Compute;
  event.pid = track_id(e, "pid", source, path);
  event.tid = track_id(e, "tid", source, path);
  event.start = finite_number(e, "ts", source, path);
  event.duration = finite_number(e, "dur", source, path);
  if (event.duration < 0) fail(source, path + ".dur", detail::concat("must be >= 0, got ", event.duration));
  const auto args = e.find("args");
  if (args != e.end() && args->is_object()) {
    const auto id = args->find("External id");
    if (id != args->end() && id->is_number_integer()) event.external_id = id->get<long long>();
  }
  trace.has_gpu_kernels = trace.has_gpu_kernels || category == "kernel";
  trace.events.push_back(std::move(event));
}

}  // namespace

KinetoTrace parse_kineto_trace(std::string_view text, const std::string& source) {
  DUALPIPE_REQUIRE(text.size() <= kMaxKinetoBytes, "profiler trace '", source, "' is ", text.size(),
                   " bytes, above the limit of ", describe_bytes(kMaxKinetoBytes));
  // Each element of traceEvents is read as the parser completes it, then dropped from the document: a whole
  // trace's document took 6 times the file's size (923 MB for 153 MB), the events alone take about a third of it.
  KinetoTrace trace;
  // The parser's depth: the top-level object's keys and values are at 1, the elements of its arrays at 2.
  using event_t = json::parse_event_t;
  std::string top_key;           // the top-level key whose value is being parsed
  bool in_trace_events = false;  // inside the traceEvents array
  std::size_t elements = 0;      // of traceEvents, so far
  json doc;
  try {
    doc = json::parse(text.begin(), text.end(), [&](int depth, event_t event, json& parsed) {
      if (depth > kMaxKinetoDepth)
        fail(source, "(top level)", detail::concat("JSON nested deeper than ", kMaxKinetoDepth, " levels"));
      if (depth == 1 && event == event_t::key) top_key = parsed.get<std::string>();
      if (depth == 1 && (event == event_t::array_start || event == event_t::array_end))
        in_trace_events = event == event_t::array_start && top_key == "traceEvents";
      // An element of traceEvents ends: an object, a nested array or a plain value.
      const bool element_ends =
          depth == 2 && (event == event_t::object_end || event == event_t::array_end || event == event_t::value);
      if (!in_trace_events || !element_ends) return true;
      add_event(parsed, source, elements++, trace);
      return false;  // not kept in the document
    });
  } catch (const json::exception& e) {
    throw InvalidArgument(detail::concat("profiler trace '", source, "' is not valid JSON: ", e.what()));
  }
  if (!doc.is_object()) fail(source, "(top level)", "expected an object with traceEvents");
  const auto events = doc.find("traceEvents");
  if (events == doc.end() || !events->is_array()) fail(source, "traceEvents", "missing, or not an array");
  return trace;
}

KinetoTrace read_kineto_trace(const std::string& path) {
  return parse_kineto_trace(read_file_within(path, kMaxKinetoBytes, "profiler traces"), path);
}

}  // namespace dualpipe
