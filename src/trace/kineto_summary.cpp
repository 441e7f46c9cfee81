#include <algorithm>
#include <map>

#include "dualpipe/trace/kineto.h"

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

}  // namespace

KinetoSummary summarize_kineto(const KinetoTrace& trace) {
  // With GPU kernels in the trace, the GPU's own timeline is measured: kernels and the GPU ranges of regions.
  std::map<long long, std::vector<const KinetoEvent*>> by_process;
  for (const KinetoEvent& e : trace.events)
    if (e.gpu == trace.has_gpu_kernels) by_process[e.pid].push_back(&e);

  KinetoSummary summary;
  summary.processes = int(by_process.size());
  struct Occurrences {
    std::vector<double> durations;
    double compute = 0, communication = 0, overlapped = 0;
  };
  std::map<std::string, Occurrences> occurrences;
  std::vector<std::string> order;
  for (const auto& [pid, events] : by_process) {
    // Operators, kernels and communication (gloo's annotations on its own threads included), apart from regions.
    std::vector<const KinetoEvent*> ops, regions;
    for (const KinetoEvent* e : events) (e->kind == KinetoKind::Region ? regions : ops).push_back(e);
    std::vector<Interval> compute, communication;
    for (const KinetoEvent* op : trace.has_gpu_kernels ? ops : outermost(ops))
      (op->kind == KinetoKind::Communication ? communication : compute).push_back({op->start, op->start + op->duration});
    const CoveredTime computing(merged(compute)), communicating(merged(communication));
    const CoveredTime overlap(intersection(computing.intervals(), communicating.intervals()));
    summary.compute += computing.total();
    summary.communication += communicating.total();
    summary.overlapped += overlap.total();
    std::vector<KinetoEvent> occurrences_here;
    if (trace.has_gpu_kernels) {
      occurrences_here = joined_gpu_ranges(regions);
    } else {
      for (const KinetoEvent* r : regions) occurrences_here.push_back(*r);
    }
    std::sort(occurrences_here.begin(), occurrences_here.end(),
              [](const KinetoEvent& a, const KinetoEvent& b) { return a.start < b.start; });
    for (const KinetoEvent& occurrence : occurrences_here) {
      const KinetoEvent* r = &occurrence;
      const std::string name = region_name(r->name);
      auto [it, inserted] = occurrences.try_emplace(name);
      if (inserted) order.push_back(name);
      const double end = r->start + r->duration;
      it->second.durations.push_back(r->duration);
      it->second.compute += computing.inside(r->start, end);
      it->second.communication += communicating.inside(r->start, end);
      it->second.overlapped += overlap.inside(r->start, end);
    }
  }
  for (const std::string& name : order) {
    Occurrences& o = occurrences[name];
    KinetoRegion region;
    region.name = name;
    region.durations = o.durations;
    std::sort(o.durations.begin(), o.durations.end());
    const size_t n = o.durations.size();
    region.count = int(n);
    region.median_duration = n % 2 ? o.durations[n / 2] : (o.durations[n / 2 - 1] + o.durations[n / 2]) / 2;
    for (const double d : o.durations) region.mean_duration += d / n;
    region.mean_compute = o.compute / n, region.mean_communication = o.communication / n;
    region.mean_overlapped = o.overlapped / n;
    summary.regions.push_back(region);
  }
  return summary;
}

}  // namespace dualpipe
