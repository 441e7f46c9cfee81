#include <algorithm>
#include <map>
#include <numeric>
#include <unordered_map>

#include "dualpipe/trace/kineto.h"
#include "dualpipe/util/median.h"
#include "kineto_annotations.h"

namespace dualpipe {

namespace {

struct Interval {
  double start, end;
};

// Sorted, disjoint intervals covering the same time.
std::vector<Interval> merged(std::vector<Interval> intervals) {
  std::sort(intervals.begin(), intervals.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  std::vector<Interval> out;
  for (const Interval& i : intervals) {
    if (!out.empty() && i.start <= out.back().end) {
      out.back().end = std::max(out.back().end, i.end);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

std::vector<Interval> intersection(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::vector<Interval> out;
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    const double start = std::max(a[i].start, b[j].start), end = std::min(a[i].end, b[j].end);
    if (start < end) out.push_back({start, end});
    (a[i].end < b[j].end ? i : j)++;
  }
  return out;
}

// Sorted disjoint intervals, with the time they cover before each: the time inside any [start, end] in two binary
// searches, however many intervals it spans (a region over a whole step spans all of that step's operators).
class CoveredTime {
 public:
  explicit CoveredTime(std::vector<Interval> intervals) : intervals_(std::move(intervals)) {
    before_.reserve(intervals_.size() + 1);
    before_.push_back(0);
    for (const Interval& i : intervals_) before_.push_back(before_.back() + (i.end - i.start));
  }
  const std::vector<Interval>& intervals() const { return intervals_; }
  double total() const { return before_.back(); }
  double inside(double start, double end) const { return end > start ? up_to(end) - up_to(start) : 0; }

 private:
  // The time covered before t: every interval that ends by t, and the part of the next one before t.
  double up_to(double t) const {
    const auto next = std::upper_bound(intervals_.begin(), intervals_.end(), t,
                                       [](double time, const Interval& i) { return time < i.end; });
    const size_t k = size_t(next - intervals_.begin());
    return before_[k] + (k < intervals_.size() ? std::max(0.0, t - next->start) : 0.0);
  }
  std::vector<Interval> intervals_;
  std::vector<double> before_;
};

// On the CPU an operator's children are operators too: only the outermost of each thread counts, and nothing
// inside a communication operator counts as compute.
std::vector<const KinetoEvent*> outermost(std::vector<const KinetoEvent*> ops) {
  std::sort(ops.begin(), ops.end(), [](const KinetoEvent* a, const KinetoEvent* b) {
    if (a->tid != b->tid) return a->tid < b->tid;
    if (a->start != b->start) return a->start < b->start;
    return a->duration > b->duration;
  });
  std::vector<const KinetoEvent*> out;
  long long tid = 0;
  double open_until = -1e300;
  for (const KinetoEvent* op : ops) {
    if (out.empty() || op->tid != tid) tid = op->tid, open_until = -1e300;
    if (op->start + op->duration <= open_until) continue;
    out.push_back(op);
    open_until = op->start + op->duration;
  }
  return out;
}

// A region whose kernels ran on several streams has a GPU range on each, with the same External id: one
// occurrence, from the first start to the last end.
std::vector<KinetoEvent> joined_gpu_ranges(const std::vector<const KinetoEvent*>& regions) {
  std::vector<KinetoEvent> out;
  std::map<std::pair<std::string, long long>, size_t> occurrence;
  for (const KinetoEvent* r : regions) {
    const auto key = std::make_pair(r->name, r->external_id);
    const auto it = r->external_id != 0 ? occurrence.find(key) : occurrence.end();
    if (it == occurrence.end()) {
      if (r->external_id != 0) occurrence[key] = out.size();
      out.push_back(*r);
      continue;
    }
    KinetoEvent& joined = out[it->second];
    const double end = std::max(joined.start + joined.duration, r->start + r->duration);
    joined.start = std::min(joined.start, r->start);
    joined.duration = end - joined.start;
  }
  return out;
}

std::string region_name(const std::string& name) {
  const size_t hash = name.rfind('#');
  if (hash != std::string::npos && hash + 1 < name.size() &&
      name.find_first_not_of("0123456789", hash + 1) == std::string::npos)
    return name.substr(0, hash);
  return name;
}

// One piece of work (a kernel, a copy, an operator) and where it was issued: the thread, and the time there.
struct Work {
  const KinetoEvent* event;
  long long pid = 0, tid = 0;  // of the issuing thread; pid < 0: unknown (GPU work whose launch is not in the trace)
  double time = 0;
};

bool is_gloo_run(const KinetoEvent& e) { return e.name.rfind("gloo:", 0) == 0; }

// GPU work, or (no GPU in the trace) the outermost operators of every thread, with communication annotations.
// Where Gloo's worker thread is in the trace (profile_all_threads), its runs of the collectives are the
// communication, and the operators that issued them (c10d::..., record_param_comms) are not counted again.
std::vector<const KinetoEvent*> work_events(const KinetoTrace& trace) {
  std::vector<const KinetoEvent*> work, cpu;
  for (const KinetoEvent& e : trace.events) {
    if (e.kind == KinetoKind::Region || e.kind == KinetoKind::Launch) continue;
    if (e.gpu) work.push_back(&e);
    if (!e.gpu) cpu.push_back(&e);
  }
  if (trace.has_gpu_kernels) return work;
  std::map<long long, std::vector<const KinetoEvent*>> by_process;
  std::map<long long, bool> gloo_runs;
  for (const KinetoEvent* e : cpu) {
    by_process[e->pid].push_back(e);
    gloo_runs[e->pid] = gloo_runs[e->pid] || is_gloo_run(*e);
  }
  for (auto& [pid, events] : by_process)
    for (const KinetoEvent* e : outermost(std::move(events)))
      if (!gloo_runs[pid] || e->kind != KinetoKind::Communication || is_gloo_run(*e)) work.push_back(e);
  return work;
}

// The CUDA runtime and driver calls by correlation id (the first of an id).
using Launches = std::unordered_map<long long, const KinetoEvent*>;

Launches launches_of(const KinetoTrace& trace) {
  Launches launches;
  if (trace.has_gpu_kernels)
    for (const KinetoEvent& e : trace.events)
      if (e.kind == KinetoKind::Launch && e.correlation != 0) launches.try_emplace(e.correlation, &e);
  return launches;
}

// Where each piece of work was issued: its launch (correlation ids), or its own thread on the CPU.
std::vector<Work> issued(const std::vector<const KinetoEvent*>& events, const Launches& launches) {
  std::vector<Work> out;
  for (const KinetoEvent* e : events) {
    if (!e->gpu) {
      out.push_back({e, e->pid, e->tid, e->start});
      continue;
    }
    const auto launch = e->correlation != 0 ? launches.find(e->correlation) : launches.end();
    if (launch == launches.end()) {
      out.push_back({e, -1, 0, 0});
    } else {
      out.push_back({e, launch->second->pid, launch->second->tid, launch->second->start});
    }
  }
  return out;
}

KinetoAttribution attribution_of(const KinetoTrace& trace, const Launches& launches) {
  if (!trace.has_gpu_kernels) return KinetoAttribution::Threads;
  for (const KinetoEvent& e : trace.events)
    if (e.gpu && e.kind != KinetoKind::Region && e.correlation != 0 && launches.count(e.correlation))
      return KinetoAttribution::Launches;
  return KinetoAttribution::GpuRanges;
}

// Compute and communication over one process's (or GPU's) timeline: the whole trace's figures.
struct Timeline {
  CoveredTime computing{{}}, communicating{{}}, overlap{{}};
};

std::map<long long, Timeline> timelines(const std::vector<const KinetoEvent*>& work) {
  std::map<long long, std::pair<std::vector<Interval>, std::vector<Interval>>> intervals;
  for (const KinetoEvent* e : work)
    (e->kind == KinetoKind::Communication ? intervals[e->pid].second : intervals[e->pid].first)
        .push_back({e->start, e->start + e->duration});
  std::map<long long, Timeline> out;
  for (auto& [pid, lists] : intervals) {
    Timeline& t = out[pid];
    t.computing = CoveredTime(merged(std::move(lists.first)));
    t.communicating = CoveredTime(merged(std::move(lists.second)));
    t.overlap = CoveredTime(intersection(t.computing.intervals(), t.communicating.intervals()));
  }
  return out;
}

struct Owned {
  double compute = 0, communication = 0, overlapped = 0;
};

// Accumulates one region name's occurrences, in order of first appearance.
class RegionTable {
 public:
  void add(const std::string& raw_name, double start, double duration, const Owned& owned) {
    const std::string name = region_name(raw_name);
    auto [it, inserted] = occurrences_.try_emplace(name);
    if (inserted) order_.push_back(name);
    it->second.starts.push_back(start);
    it->second.durations.push_back(duration);
    it->second.owned.compute += owned.compute;
    it->second.owned.communication += owned.communication;
    it->second.owned.overlapped += owned.overlapped;
  }
  std::vector<KinetoRegion> regions() {
    std::vector<KinetoRegion> out;
    for (const std::string& name : order_) {
      Occurrences& o = occurrences_[name];
      KinetoRegion region;
      region.name = name;
      region.durations = o.durations;
      region.starts = o.starts;
      std::sort(o.durations.begin(), o.durations.end());  // the mean summed in this order, as it always was
      const size_t n = o.durations.size();
      region.count = int(n);
      region.median_duration = median(o.durations);
      for (const double d : o.durations) region.mean_duration += d / n;
      region.mean_compute = o.owned.compute / n, region.mean_communication = o.owned.communication / n;
      region.mean_overlapped = o.owned.overlapped / n;
      out.push_back(region);
    }
    return out;
  }

 private:
  struct Occurrences {
    std::vector<double> starts, durations;
    Owned owned;
  };
  std::map<std::string, Occurrences> occurrences_;
  std::vector<std::string> order_;
};

// The old reading, for GPU kernels without correlation ids: a region's GPU range holds what ran inside it.
void regions_by_gpu_ranges(const KinetoTrace& trace, const std::map<long long, Timeline>& timeline,
                           RegionTable& table) {
  std::map<long long, std::vector<const KinetoEvent*>> ranges;
  for (const KinetoEvent& e : trace.events)
    if (e.gpu && e.kind == KinetoKind::Region) ranges[e.pid].push_back(&e);
  for (const auto& [pid, regions] : ranges) {
    std::vector<KinetoEvent> occurrences = joined_gpu_ranges(regions);
    std::sort(occurrences.begin(), occurrences.end(),
              [](const KinetoEvent& a, const KinetoEvent& b) { return a.start < b.start; });
    const auto t = timeline.find(pid);
    for (const KinetoEvent& r : occurrences) {
      Owned inside;
      if (t != timeline.end()) {
        const double end = r.start + r.duration;
        inside = {t->second.computing.inside(r.start, end), t->second.communicating.inside(r.start, end),
                  t->second.overlap.inside(r.start, end)};
      }
      table.add(r.name, r.start, r.duration, inside);
    }
  }
}

// The issuing thread of communication run on a worker thread with no annotation (gloo's): the thread of the last
// communication operator issued before it began, elsewhere in the process.
class Issuers {
 public:
  explicit Issuers(const KinetoTrace& trace) {
    for (const KinetoEvent& e : trace.events)
      if (!e.gpu && e.kind == KinetoKind::Communication && !is_gloo_run(e)) by_process_[e.pid].push_back(&e);
    for (auto& [pid, ops] : by_process_)
      std::sort(ops.begin(), ops.end(), [](const KinetoEvent* a, const KinetoEvent* b) { return a->start < b->start; });
  }
  const KinetoEvent* of(const Work& w) const {
    const auto it = by_process_.find(w.pid);
    if (it == by_process_.end()) return nullptr;
    const std::vector<const KinetoEvent*>& ops = it->second;
    auto next = std::upper_bound(ops.begin(), ops.end(), w.time,
                                 [](double t, const KinetoEvent* e) { return t < e->start; });
    for (int steps = 0; next != ops.begin() && steps < 64; ++steps)
      if ((*--next)->tid != w.tid) return *next;
    return nullptr;
  }

 private:
  std::map<long long, std::vector<const KinetoEvent*>> by_process_;
};

// Each annotation's work: the work issued inside it on its thread, or (from a thread with no annotation open)
// inside the annotation open on the issuing thread, credited to the annotations around it too.
void regions_by_ownership(const KinetoTrace& trace, const std::vector<const KinetoEvent*>& work_list,
                          const Launches& launches, const std::map<long long, Timeline>& timeline,
                          RegionTable& table) {
  std::map<long long, kineto_detail::ProcessAnnotations> processes;
  for (const KinetoEvent& e : trace.events)
    if (!e.gpu && e.kind == KinetoKind::Region) processes[e.pid].add(&e);
  for (auto& [pid, annotations] : processes) annotations.index();
  std::map<long long, std::vector<Owned>> owned;
  for (auto& [pid, annotations] : processes) owned[pid].resize(annotations.size());

  const auto credit = [&](long long pid, int occurrence, const KinetoEvent& e) {
    const auto t = timeline.find(e.pid);
    const double overlapped = e.kind == KinetoKind::Communication && t != timeline.end()
                                  ? t->second.computing.inside(e.start, e.start + e.duration)
                                  : 0;
    const kineto_detail::ProcessAnnotations& annotations = processes.at(pid);
    for (int depth = 0; occurrence >= 0 && depth < kMaxKinetoDepth; ++depth) {
      Owned& o = owned[pid][static_cast<std::size_t>(occurrence)];
      (e.kind == KinetoKind::Communication ? o.communication : o.compute) += e.duration;
      o.overlapped += overlapped;
      occurrence = annotations.parent(occurrence);
    }
  };
  const Issuers issuers(trace);
  std::map<long long, std::vector<const Work*>> unowned;  // by process: no annotation open where issued
  const std::vector<Work> work = issued(work_list, launches);
  for (const Work& w : work) {
    const auto process = w.pid >= 0 ? processes.find(w.pid) : processes.end();
    if (process == processes.end()) continue;
    int occurrence = process->second.innermost(w.tid, w.time);
    if (occurrence < 0 && w.event->kind == KinetoKind::Communication && !w.event->gpu)
      if (const KinetoEvent* issuer = issuers.of(w)) occurrence = process->second.innermost(issuer->tid, issuer->start);
    if (occurrence >= 0) {
      credit(w.pid, occurrence, *w.event);
    } else {
      unowned[w.pid].push_back(&w);
    }
  }
  for (const auto& [pid, list] : unowned) {
    std::vector<double> times;
    for (const Work* w : list) times.push_back(w->time);
    const std::vector<int> open = processes.at(pid).latest_open(times);
    for (std::size_t i = 0; i < list.size(); ++i)
      if (open[i] >= 0) credit(pid, open[i], *list[i]->event);
  }
  // A region's GPU range (gpu_user_annotation, with its CPU record's External id), where the trace has one, is its
  // duration on the GPU: what a GPU's regions are timed by.
  std::unordered_map<long long, std::pair<double, double>> gpu_range;  // external id -> start, duration
  std::map<long long, std::vector<const KinetoEvent*>> ranges;
  for (const KinetoEvent& e : trace.events)
    if (e.gpu && e.kind == KinetoKind::Region && e.external_id != 0) ranges[e.pid].push_back(&e);
  for (const auto& [pid, list] : ranges)
    for (const KinetoEvent& joined : joined_gpu_ranges(list))
      gpu_range[joined.external_id] = {joined.start, joined.duration};
  const auto timed = [&](const KinetoEvent& annotation) {
    const auto it = annotation.external_id != 0 ? gpu_range.find(annotation.external_id) : gpu_range.end();
    return it != gpu_range.end() ? it->second : std::pair{annotation.start, annotation.duration};
  };
  for (const auto& process : processes) {  // not a structured binding: the lambda below captures it (C++17)
    const kineto_detail::ProcessAnnotations& annotations = process.second;
    std::vector<int> in_time(annotations.size());
    std::iota(in_time.begin(), in_time.end(), 0);
    std::stable_sort(in_time.begin(), in_time.end(),
                     [&](int a, int b) { return annotations.at(a).start < annotations.at(b).start; });
    for (int i : in_time) {
      const auto [start, duration] = timed(annotations.at(i));
      table.add(annotations.at(i).name, start, duration, owned[process.first][static_cast<std::size_t>(i)]);
    }
  }
}

std::vector<KinetoStream> streams_of(const std::vector<const KinetoEvent*>& work) {
  std::map<std::pair<long long, long long>, KinetoStream> streams;
  for (const KinetoEvent* e : work) {
    KinetoStream& s = streams[{e->pid, e->tid}];
    s.pid = e->pid, s.tid = e->tid;
    ++s.events;
    (e->kind == KinetoKind::Communication ? s.communication : s.compute) += e->duration;
  }
  std::vector<KinetoStream> out;
  for (const auto& [key, s] : streams) out.push_back(s);
  return out;
}

}  // namespace

KinetoSummary summarize_kineto(const KinetoTrace& trace) {
  KinetoSummary summary;
  const Launches launches = launches_of(trace);
  summary.attribution = attribution_of(trace, launches);
  const std::vector<const KinetoEvent*> work = work_events(trace);
  const std::map<long long, Timeline> timeline = timelines(work);
  for (const auto& [pid, t] : timeline) {
    summary.compute += t.computing.total();
    summary.communication += t.communicating.total();
    summary.overlapped += t.overlap.total();
  }
  summary.exposed = summary.communication - summary.overlapped;
  std::map<long long, char> processes;
  for (const KinetoEvent& e : trace.events)
    if (e.gpu == trace.has_gpu_kernels) processes[e.pid] = 1;
  summary.processes = int(processes.size());
  RegionTable table;
  if (summary.attribution == KinetoAttribution::GpuRanges) {
    regions_by_gpu_ranges(trace, timeline, table);
  } else {
    regions_by_ownership(trace, work, launches, timeline, table);
  }
  summary.regions = table.regions();
  summary.streams = streams_of(work);
  return summary;
}

}  // namespace dualpipe
