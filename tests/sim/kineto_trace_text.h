// PyTorch profiler traces written by hand for the Kineto tests, and the checks they share on what was read back.
#pragma once

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "dualpipe/trace/kineto.h"

namespace dualpipe::test {

// A complete ("X") event; `args`, when given, is the text of its args object's members, as
// "\"correlation\": 3".
inline std::string kineto_event(const std::string& cat, const std::string& name, int pid, int tid, double ts,
                                double dur, const std::string& args = "") {
  std::string e = "{\"ph\": \"X\", \"cat\": \"" + cat + "\", \"name\": \"" + name + "\", \"pid\": " +
                  std::to_string(pid) + ", \"tid\": " + std::to_string(tid) + ", \"ts\": " + std::to_string(ts) +
                  ", \"dur\": " + std::to_string(dur);
  if (!args.empty()) e += ", \"args\": {" + args + "}";
  return e + "}";
}

// A trace file holding `events` in order.
inline std::string kineto_trace(const std::vector<std::string>& events) {
  std::string text = "{\"traceEvents\": [";
  for (std::size_t i = 0; i < events.size(); ++i) text += (i ? ", " : "") + events[i];
  return text + "]}";
}

// The summary's region called `name`; throws when there is none.
inline const KinetoRegion& region_named(const KinetoSummary& summary, const std::string& name) {
  for (const KinetoRegion& r : summary.regions)
    if (r.name == name) return r;
  throw std::runtime_error("no region " + name);
}

// The whole trace's compute and communication time, and how much of the communication ran beside compute.
inline void expect_trace_times(const KinetoSummary& s, double compute, double communication, double overlapped) {
  EXPECT_DOUBLE_EQ(s.compute, compute);
  EXPECT_DOUBLE_EQ(s.communication, communication);
  EXPECT_DOUBLE_EQ(s.overlapped, overlapped);
}

// The same three times of one region, as means over its occurrences.
inline void expect_region_means(const KinetoRegion& r, double compute, double communication, double overlapped) {
  EXPECT_DOUBLE_EQ(r.mean_compute, compute) << "region " << r.name;
  EXPECT_DOUBLE_EQ(r.mean_communication, communication) << "region " << r.name;
  EXPECT_DOUBLE_EQ(r.mean_overlapped, overlapped) << "region " << r.name;
}

}  // namespace dualpipe::test
