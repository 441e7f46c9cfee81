#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "dualpipe/trace/json_syntax.h"
#include "dualpipe/trace/kineto.h"
#include "dualpipe/trace/name_pattern.h"
#include "dualpipe/util/byte_size.h"
#include "dualpipe/util/error.h"
#include "dualpipe/util/file_input.h"
#include "dualpipe/util/printable.h"

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

// An element of traceEvents, named only when an error needs it (a trace has millions).
struct Where {
  const std::string& source;
  std::size_t index;
  [[noreturn]] void fail(const char* field, const std::string& what) const {
    dualpipe::fail(source, detail::concat("traceEvents[", index, "]", field), what);
  }
};

double finite_number(const json& e, const char* key, const Where& where) {
  const auto it = e.find(key);
  if (it == e.end() || !it->is_number()) where.fail(detail::concat(".", key).c_str(), "expected a number");
  const double value = it->get<double>();
  if (!std::isfinite(value)) where.fail(detail::concat(".", key).c_str(), "expected a finite number");
  return value;
}

// pid and tid are integers, or strings for device tracks ("Spans", "stream 7"): hashed to a number.
long long track_id(const json& e, const char* key, const Where& where) {
  const auto it = e.find(key);
  if (it == e.end()) where.fail(detail::concat(".", key).c_str(), "missing");
  if (it->is_number_integer()) return it->get<long long>();
  if (it->is_string()) return static_cast<long long>(std::hash<std::string>{}(it->get<std::string>()) >> 1);
  where.fail(detail::concat(".", key).c_str(), "expected an integer or a string");
}

}  // namespace

bool is_library_communication_name(std::string_view name) {
  const std::string n = lower(name);
  for (const char* prefix : {"nccl", "gloo:", "c10d::", "record_param_comms"})
    if (n.rfind(prefix, 0) == 0) return true;
  // DeepEP's kernels: "void deep_ep::intranode::dispatch<...>(...)", DeepSeek's "void dpsk::ep::internode::combine".
  return n.find("deep_ep::") != std::string::npos || n.find("::ep::") != std::string::npos;
}

bool is_communication_name(std::string_view name) {
  if (is_library_communication_name(name)) return true;
  const std::string n = lower(name);
  for (const char* part : {"all_reduce", "allreduce", "all_gather", "allgather", "reduce_scatter", "reducescatter",
                           "all_to_all", "alltoall", "broadcast", "sendrecv", "nvshmem", "cross_device_reduce",
                           "one_shot_all_reduce", "two_shot_all_reduce"})
    if (n.find(part) != std::string::npos) return true;
  return n == "send" || n == "recv" || n.rfind("send_", 0) == 0 || n.rfind("recv_", 0) == 0;
}

namespace {

// Whether a name is communication: the built-in names, then the user's patterns, each name searched once.
class CommunicationNames {
 public:
  CommunicationNames(const KinetoReadOptions& options, const std::string& source) {
    DUALPIPE_REQUIRE(options.communication_patterns.size() <= kMaxCommunicationPatterns, "profiler trace '", source,
                     "': at most ", kMaxCommunicationPatterns, " communication patterns, got ",
                     options.communication_patterns.size());
    for (const std::string& pattern : options.communication_patterns) {
      DUALPIPE_REQUIRE(!pattern.empty(), "a communication pattern (--comm-kernel) is empty");
      patterns_.push_back(compile_name_pattern(pattern, "communication pattern (--comm-kernel)"));
    }
  }
  bool operator()(const std::string& name) {
    if (is_communication_name(name)) return true;
    if (patterns_.empty()) return false;
    const auto [it, inserted] = known_.try_emplace(name, false);
    if (inserted)
      for (const std::regex& p : patterns_) it->second = it->second || std::regex_search(name, p);
    return it->second;
  }

 private:
  std::vector<std::regex> patterns_;
  std::unordered_map<std::string, bool> known_;
};

// GPU work on a stream whose kernels are all communication (a communication library's own stream) is
// communication, its copies and memsets included.
void copies_on_communication_streams(const std::vector<std::size_t>& copies, KinetoTrace& trace) {
  std::map<std::pair<long long, long long>, bool> all_communication;  // by (pid, stream), of its kernels
  std::vector<char> is_copy(trace.events.size(), 0);
  for (std::size_t i : copies) is_copy[i] = 1;
  for (std::size_t i = 0; i < trace.events.size(); ++i) {
    const KinetoEvent& e = trace.events[i];
    if (!e.gpu || e.kind == KinetoKind::Region || is_copy[i]) continue;
    auto [it, inserted] = all_communication.try_emplace({e.pid, e.tid}, true);
    it->second = it->second && e.kind == KinetoKind::Communication;
  }
  for (std::size_t i : copies) {
    KinetoEvent& e = trace.events[i];
    const auto it = all_communication.find({e.pid, e.tid});
    if (it != all_communication.end() && it->second) e.kind = KinetoKind::Communication;
  }
}

struct Reader {
  const std::string& source;
  CommunicationNames communication;
  KinetoTrace trace;
  std::vector<std::size_t> copies;  // memcpy and memset events, by index

  // One element of traceEvents: appended to `trace` when it is a complete event of a category used.
  void add_event(const json& e, std::size_t index);
};

void Reader::add_event(const json& e, std::size_t index) {
  const Where where{source, index};
  if (!e.is_object()) where.fail("", "expected an object");
  const auto ph = e.find("ph"), cat = e.find("cat");
  if (ph == e.end() || !ph->is_string() || *ph != "X" || cat == e.end() || !cat->is_string()) return;
  const std::string& category = cat->get_ref<const std::string&>();
  const bool region = category == "user_annotation" || category == "gpu_user_annotation";
  const bool copy = category == "gpu_memcpy" || category == "gpu_memset";
  const bool gpu_work = category == "kernel" || copy;
  const bool launch = category == "cuda_runtime" || category == "cuda_driver";
  if (!region && !gpu_work && !launch && category != "cpu_op") return;
  KinetoEvent event;
  const auto name = e.find("name");
  if (name == e.end() || !name->is_string()) where.fail(".name", "expected a string");
  event.name = name->get<std::string>();
  if (event.name.size() > 4096) where.fail(".name", "longer than 4096 characters");
  event.gpu = gpu_work || category == "gpu_user_annotation";
  // A program's own region may be called "allreduce"; the libraries' annotations carry their prefix.
  if (launch) {
    event.kind = KinetoKind::Launch;
  } else if (region) {
    event.kind = is_library_communication_name(event.name) ? KinetoKind::Communication : KinetoKind::Region;
  } else {
    event.kind = communication(event.name) ? KinetoKind::Communication : KinetoKind::Compute;
  }
  event.pid = track_id(e, "pid", where);
  event.tid = track_id(e, "tid", where);
  event.start = finite_number(e, "ts", where);
  event.duration = finite_number(e, "dur", where);
  if (event.duration < 0) where.fail(".dur", detail::concat("must be >= 0, got ", event.duration));
  // Microseconds: a profiled step lasts seconds; a region of a day, or a time past 3,000 years, is no trace's.
  if (event.duration > kMaxKinetoDurationUs)
    where.fail(".dur",
               detail::concat("must be at most ", kMaxKinetoDurationUs, " us (a day), got ", event.duration));
  if (std::abs(event.start) > kMaxKinetoTimeUs)
    where.fail(".ts", detail::concat("must be within +-", kMaxKinetoTimeUs, " us, got ", event.start));
  const auto args = e.find("args");
  if (args != e.end() && args->is_object()) {
    const auto id = args->find("External id");
    if (id != args->end() && id->is_number_integer()) event.external_id = id->get<long long>();
    const auto correlation = args->find("correlation");
    if (correlation != args->end() && correlation->is_number_integer())
      event.correlation = correlation->get<long long>();
  }
  trace.has_gpu_kernels = trace.has_gpu_kernels || gpu_work;
  if (copy) copies.push_back(trace.events.size());
  trace.events.push_back(std::move(event));
}

}  // namespace

KinetoTrace parse_kineto_trace(std::string_view text, const std::string& source, const KinetoReadOptions& options) {
  DUALPIPE_REQUIRE(text.size() <= kMaxKinetoBytes, "profiler trace '", source, "' is ", text.size(),
                   " bytes, above the limit of ", describe_bytes(kMaxKinetoBytes));
  // Each element of traceEvents is read as the parser completes it, then dropped from the document: a whole
  // trace's document took 6 times the file's size (923 MB for 153 MB), the events alone take about a third of it.
  Reader reader{source, CommunicationNames(options, source), {}, {}};
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
      reader.add_event(parsed, elements++);
      return false;  // not kept in the document
    });
  } catch (const json::exception& e) {
    throw InvalidArgument(
        detail::concat("profiler trace '", source, "' is not valid JSON: ", json_syntax_problem(text, e.what())));
  }
  if (!doc.is_object()) fail(source, "(top level)", "expected an object with traceEvents");
  const auto events = doc.find("traceEvents");
  if (events == doc.end() || !events->is_array()) fail(source, "traceEvents", "missing, or not an array");
  copies_on_communication_streams(reader.copies, reader.trace);
  const auto info = doc.find("distributedInfo");
  if (info != doc.end() && info->is_object()) {
    const auto rank = info->find("rank");
    if (rank != info->end()) {
      if (!rank->is_number_integer()) fail(source, "distributedInfo.rank", "expected an integer");
      const long long r = rank->get<long long>();
      if (r < 0 || r >= kMaxKinetoRanks)
        fail(source, "distributedInfo.rank", detail::concat("must be 0 to ", kMaxKinetoRanks - 1, ", got ", r));
      reader.trace.rank = static_cast<int>(r);
    }
  }
  // `dualpipe train --kineto-trace`'s record of the schedule the rank ran.
  const auto run = doc.find("dualpipe");
  if (run != doc.end()) {
    if (!run->is_object()) fail(source, "dualpipe", "expected an object (the schedule the rank ran)");
    const auto text_field = [&](const char* name) {
      const auto it = run->find(name);
      if (it == run->end()) return std::string();
      if (!it->is_string()) fail(source, detail::concat("dualpipe.", name), "expected a string");
      return it->get<std::string>();
    };
    // A name printed back in the plan's report: a line of printable text.
    const auto name_field = [&](const char* name) {
      std::string text = text_field(name);
      if (text.size() > kMaxKinetoKindLength || first_unprintable(text) != std::string::npos)
        fail(source, detail::concat("dualpipe.", name), detail::concat("must be at most ", kMaxKinetoKindLength,
                                                                       " printable characters on one line, got ",
                                                                       text.substr(0, 80)));
      return text;
    };
    reader.trace.schedule = text_field("schedule");
    reader.trace.schedule_kind = name_field("kind");
    reader.trace.host = name_field("host");
    const auto cores = run->find("host_cores");
    if (cores != run->end()) {
      if (!cores->is_number_integer() || cores->get<long long>() < 1 || cores->get<long long>() > kMaxKinetoHostCores)
        fail(source, "dualpipe.host_cores", detail::concat("must be an integer from 1 to ", kMaxKinetoHostCores,
                                                           ", got ", cores->dump()));
      reader.trace.host_cores = cores->get<int>();
    }
  }
  return std::move(reader.trace);
}

KinetoTrace read_kineto_trace(const std::string& path, const KinetoReadOptions& options) {
  return parse_kineto_trace(read_file_within(path, kMaxKinetoBytes, "profiler traces"), path, options);
}

bool looks_like_profiler_trace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(1 << 20, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  return head.find("\"cat\"") != std::string::npos && head.find("\"dualpipe\"") == std::string::npos;
}

}  // namespace dualpipe
