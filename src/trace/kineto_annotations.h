// The record_function annotations of one process, as a lookup of the ones open at a moment (internal to
// kineto_summary.cpp): the innermost open on a thread, the annotations around it, and the innermost open on any
// thread.
#pragma once

#include <map>
#include <vector>

#include "dualpipe/trace/kineto.h"

namespace dualpipe::kineto_detail {

class ProcessAnnotations {
 public:
  void add(const KinetoEvent* annotation);
  // After the last add(), before any lookup.
  void index();

  std::size_t size() const { return annotations_.size(); }
  const KinetoEvent& at(int i) const { return *annotations_[static_cast<std::size_t>(i)]; }
  // The innermost annotation open on `tid` at `time` (start <= time <= end), or -1.
  int innermost(long long tid, double time) const;
  // The annotation around `i` on its thread, or -1. Record_function ranges nest; in a trace whose ranges overlap
  // without nesting, the one open when `i` began.
  int parent(int i) const { return parents_[static_cast<std::size_t>(i)]; }
  // For each of `times`: the annotation open then, on any thread, that began last (the innermost of the thread that
  // is waiting on the work), or -1.
  std::vector<int> latest_open(const std::vector<double>& times) const;

 private:
  std::vector<const KinetoEvent*> annotations_;
  std::vector<int> parents_;
  std::map<long long, std::vector<int>> by_thread_;  // in order of start, then longest first
};

}  // namespace dualpipe::kineto_detail
