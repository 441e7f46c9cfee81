// PyTorch profiler traces: reading them strictly, and the time of each region split into compute, communication
// and their overlap, on traces whose intervals are laid out by hand (the answers follow from the layout).
#include <gtest/gtest.h>

#include "dualpipe/trace/kineto.h"
#include "dualpipe/util/error.h"
#include "sim/kineto_trace_text.h"
#include "test_helpers.h"

namespace dualpipe {
namespace {

using test::expect_region_means;
using test::expect_trace_times;
using test::kineto_event;
using test::region_named;

// A trace that opens with process 1's name (a metadata event, which the reader passes over), then `events`.
std::string trace_of(std::vector<std::string> events) {
  events.insert(events.begin(), "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 1}");
  return test::kineto_trace(events);
}

// Thread 1 computes [0, 40] and [42, 100] (an operator with a nested one, counted once), issues an all-reduce at
// 40 inside "forward", and waits [100, 160]; gloo's thread 2 runs the all-reduce [50, 150]. The all-reduce belongs
// to "forward", where it was issued (gloo's thread has no region of its own); half of it ran beside compute. Gloo's
// run of it is the communication; the operator that issued it is not counted again.
// (Until issue 49 a region held whatever ran inside its interval on any thread: here "wait" held half the
// all-reduce that "forward" issued.)
TEST(Kineto, CpuTraceSplitsRegionsIntoComputeCommunicationAndOverlap) {
  const KinetoTrace trace = parse_kineto_trace(
      trace_of({kineto_event("user_annotation", "forward", 1, 1, 0, 100),
                kineto_event("cpu_op", "aten::linear", 1, 1, 0, 40),
                kineto_event("cpu_op", "aten::addmm", 1, 1, 10, 10),
                kineto_event("cpu_op", "c10d::allreduce_", 1, 1, 40, 2),
                kineto_event("cpu_op", "aten::mm", 1, 1, 42, 58),
                kineto_event("user_annotation", "gloo:all_reduce", 1, 2, 50, 100),
                kineto_event("user_annotation", "wait", 1, 1, 100, 60),
                kineto_event("python_function", "ignored", 1, 1, 0, 500)}),
      "cpu.json");
  EXPECT_FALSE(trace.has_gpu_kernels);
  const KinetoSummary s = summarize_kineto(trace);
  EXPECT_EQ(s.attribution, KinetoAttribution::Threads);
  EXPECT_EQ(s.processes, 1);
  expect_trace_times(s, 98, 100, 50);
  EXPECT_DOUBLE_EQ(s.exposed, 50);
  ASSERT_EQ(s.regions.size(), 2u);
  expect_region_means(region_named(s, "forward"), 98, 100, 50);
  expect_region_means(region_named(s, "wait"), 0, 0, 0);
}

// With GPU kernels, the GPU's timeline is measured: a compute stream [0, 100], NCCL on another [80, 130], and the
// region's GPU range; the CPU's operators are left out. Without correlation ids, the range holds what ran inside it.
TEST(Kineto, GpuTraceMeasuresKernelsOnTheirStreams) {
  const KinetoTrace trace = parse_kineto_trace(
      trace_of({kineto_event("cpu_op", "aten::mm", 100, 100, 0, 1000),
                kineto_event("user_annotation", "backward", 100, 100, 0, 5),
                kineto_event("kernel", "sm90_gemm", 0, 7, 0, 60), kineto_event("kernel", "elementwise", 0, 7, 60, 40),
                kineto_event("kernel", "ncclDevKernel_AllReduce_Sum_f32", 0, 20, 80, 50),
                kineto_event("gpu_user_annotation", "backward", 0, 7, 0, 130)}),
      "gpu.json");
  EXPECT_TRUE(trace.has_gpu_kernels);
  const KinetoSummary s = summarize_kineto(trace);
  EXPECT_EQ(s.attribution, KinetoAttribution::GpuRanges);  // no correlation ids
  expect_trace_times(s, 100, 50, 20);
  ASSERT_EQ(s.regions.size(), 1u);
  EXPECT_DOUBLE_EQ(region_named(s, "backward").median_duration, 130);
  EXPECT_DOUBLE_EQ(region_named(s, "backward").mean_overlapped, 20);
}

// A region whose kernels ran on two streams has a GPU range on each, with the CPU record's External id: one
// occurrence from the first start to the last end. Another occurrence (another id) stays apart.
TEST(Kineto, GpuRangesOfOneOccurrenceOnSeveralStreamsAreJoined) {
  const auto range = [](int stream, double ts, double dur, int id) {
    return kineto_event("gpu_user_annotation", "pair", 0, stream, ts, dur, "\"External id\": " + std::to_string(id));
  };
  const KinetoSummary s = summarize_kineto(parse_kineto_trace(
      trace_of({kineto_event("kernel", "gemm", 0, 7, 0, 50), range(7, 0, 50, 26), range(13, 2, 60, 26),
                range(7, 100, 30, 100)}),
      "streams.json"));
  ASSERT_EQ(s.regions.size(), 1u);
  EXPECT_EQ(s.regions[0].count, 2);
  EXPECT_EQ(s.regions[0].durations, (std::vector<double>{62, 30}));
}

TEST(Kineto, StepsAreOneRegionAndMediansAreOverOccurrences) {
  const KinetoSummary s = summarize_kineto(parse_kineto_trace(
      trace_of({kineto_event("user_annotation", "ProfilerStep#1", 1, 1, 0, 10),
                kineto_event("user_annotation", "ProfilerStep#2", 1, 1, 10, 30),
                kineto_event("user_annotation", "ProfilerStep#3", 1, 1, 40, 20)}),
      "steps.json"));
  ASSERT_EQ(s.regions.size(), 1u);
  EXPECT_EQ(s.regions[0].name, "ProfilerStep");
  EXPECT_EQ(s.regions[0].count, 3);
  EXPECT_DOUBLE_EQ(s.regions[0].median_duration, 20);
  EXPECT_DOUBLE_EQ(s.regions[0].mean_duration, 20);
  EXPECT_EQ(s.regions[0].durations, (std::vector<double>{10, 30, 20}));
}

TEST(Kineto, CommunicationNames) {
  for (const char* name : {"ncclDevKernel_SendRecv", "gloo:all_reduce", "c10d::allreduce_", "record_param_comms",
                           "all_to_all_single", "aten::all_gather_into_tensor", "send", "recv_forward"})
    EXPECT_TRUE(is_communication_name(name)) << name;
  for (const char* name : {"aten::mm", "forward", "sm90_xmma_gemm", "aten::sendfile_like"})
    EXPECT_FALSE(is_communication_name(name)) << name;
  // A program's own region called allreduce is a region; the library's annotation is communication.
  EXPECT_FALSE(is_library_communication_name("allreduce"));
  EXPECT_TRUE(is_library_communication_name("gloo:all_reduce"));
}

TEST(Kineto, ReadingIsStrictAndNamesTheEvent) {
  const auto error_of = [](const std::string& text) {
    return test::error_text([&] { parse_kineto_trace(text, "t.json"); });
  };
  EXPECT_NE(error_of("[").find("profiler trace 't.json' is not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("[]").find("expected an object with traceEvents"), std::string::npos);
  EXPECT_NE(error_of("{\"traceEvents\": 3}").find("traceEvents: missing, or not an array"), std::string::npos);
  EXPECT_NE(error_of(trace_of({kineto_event("cpu_op", "x", 1, 1, 0, -5)})).find("traceEvents[1].dur: must be >= 0"),
            std::string::npos);
  EXPECT_NE(error_of("{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": 7}]}")
                .find("traceEvents[0].name: expected a string"),
            std::string::npos);
  EXPECT_NE(error_of("{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, "
                     "\"tid\": 1, \"ts\": 1e999, \"dur\": 1}]}")
                .find("not valid JSON"),
            std::string::npos);
  EXPECT_NE(error_of("{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": [], "
                     "\"tid\": 1, \"ts\": 1, \"dur\": 1}]}")
                .find("traceEvents[0].pid: expected an integer or a string"),
            std::string::npos);
  std::string deep = "{\"traceEvents\": [], \"x\": " + std::string(100, '[') + std::string(100, ']') + "}";
  EXPECT_NE(error_of(deep).find("nested deeper than 32 levels"), std::string::npos);
}

}  // namespace
}  // namespace dualpipe
