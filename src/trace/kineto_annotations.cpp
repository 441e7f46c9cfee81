#include "kineto_annotations.h"

#include <algorithm>
#include <numeric>
#include <queue>

namespace dualpipe::kineto_detail {

namespace {

double end_of(const KinetoEvent& e) { return e.start + e.duration; }

}  // namespace

void ProcessAnnotations::add(const KinetoEvent* annotation) {
  by_thread_[annotation->tid].push_back(static_cast<int>(annotations_.size()));
  annotations_.push_back(annotation);
}

void ProcessAnnotations::index() {
  parents_.assign(annotations_.size(), -1);
  for (auto& [tid, ids] : by_thread_) {
    std::sort(ids.begin(), ids.end(), [&](int a, int b) {
      if (at(a).start != at(b).start) return at(a).start < at(b).start;
      return at(a).duration > at(b).duration;
    });
    std::vector<int> open;  // the annotations around the current one, outermost first
    for (int id : ids) {
      while (!open.empty() && end_of(at(open.back())) <= at(id).start) open.pop_back();
      parents_[static_cast<std::size_t>(id)] = open.empty() ? -1 : open.back();
      open.push_back(id);
    }
  }
}

int ProcessAnnotations::innermost(long long tid, double time) const {
  const auto thread = by_thread_.find(tid);
  if (thread == by_thread_.end()) return -1;
  const std::vector<int>& ids = thread->second;
  // The last annotation to begin by `time`; if it ended before, the one around it may still be open.
  const auto next = std::upper_bound(ids.begin(), ids.end(), time, [&](double t, int id) { return t < at(id).start; });
  if (next == ids.begin()) return -1;
  int candidate = *(next - 1);
  for (int steps = 0; candidate >= 0 && end_of(at(candidate)) < time; ++steps)
    candidate = steps < kMaxKinetoDepth ? parent(candidate) : -1;
  return candidate;
}

std::vector<int> ProcessAnnotations::latest_open(const std::vector<double>& times) const {
  std::vector<int> answer(times.size(), -1);
  std::vector<std::size_t> queries(times.size());
  std::iota(queries.begin(), queries.end(), std::size_t{0});
  std::sort(queries.begin(), queries.end(), [&](std::size_t a, std::size_t b) { return times[a] < times[b]; });
  std::vector<int> by_start(annotations_.size());
  std::iota(by_start.begin(), by_start.end(), 0);
  std::sort(by_start.begin(), by_start.end(), [&](int a, int b) { return at(a).start < at(b).start; });
  // Begun so far, latest first. One that has ended stays ended for every later query: dropped when on top.
  const auto began_earlier = [&](int a, int b) { return at(a).start < at(b).start; };
  std::priority_queue<int, std::vector<int>, decltype(began_earlier)> begun(began_earlier);
  std::size_t next = 0;
  for (std::size_t q : queries) {
    while (next < by_start.size() && at(by_start[next]).start <= times[q]) begun.push(by_start[next++]);
    while (!begun.empty() && end_of(at(begun.top())) < times[q]) begun.pop();
    if (!begun.empty()) answer[q] = begun.top();
  }
  return answer;
}

}  // namespace dualpipe::kineto_detail
