// Which record_function region owns which GPU work in a profiler trace (issue 49): through the correlation ids of
// kernels and their launches, not by time, on traces laid out by hand in the shape of DeepSeek's published DualPipe
// profile (phases annotated on the CPU, DeepEP's kernels on a side stream, backward kernels launched by autograd's
// thread). The answers follow from the layout.
#include <gtest/gtest.h>

#include "dualpipe/trace/kineto.h"
#include "dualpipe/util/error.h"
#include "sim/kineto_trace_text.h"

namespace dualpipe {
namespace {

using test::expect_region_means;
using test::expect_trace_times;
using test::kineto_trace;
using test::region_named;

// A complete event; a kernel and the launch that queued it share a `correlation` id (0: none).
std::string complete(const std::string& cat, const std::string& name, int pid, int tid, double ts, double dur,
                     int correlation = 0) {
  return test::kineto_event(cat, name, pid, tid, ts, dur,
                            correlation == 0 ? "" : "\"correlation\": " + std::to_string(correlation));
}

const char* kGemm = "void cutlass::device_kernel<gemm>";
const char* kDispatch = "void dpsk::ep::internode::dispatch<false, 8, true, 8>(int4*)";
const char* kCombine = "void deep_ep::intranode::combine<8>(int4*)";

// The CPU (process 100, thread 100) annotates attn(F) [0, 10] and dispatch(F) [10, 20] inside "step" [0, 1000]
// and launches a GEMM at 5 and DeepEP's dispatch at 15. The GPU (process 0) runs them long after, the GEMM on
// stream 7 [100, 160] and the dispatch on stream 20 [120, 200]: 40 us of the dispatch beside the GEMM.
std::vector<std::string> phases() {
  return {complete("user_annotation", "step", 100, 100, 0, 1000),
          complete("user_annotation", "attn(F)", 100, 100, 0, 10),
          complete("cuda_runtime", "cudaLaunchKernel", 100, 100, 5, 1, 1),
          complete("user_annotation", "dispatch(F)", 100, 100, 10, 10),
          complete("cuda_runtime", "cudaLaunchKernel", 100, 100, 15, 1, 2),
          complete("kernel", kGemm, 0, 7, 100, 60, 1),
          complete("kernel", kDispatch, 0, 20, 120, 80, 2)};
}

TEST(KinetoOwnership, KernelsBelongToTheAnnotationsOpenWhereTheyWereLaunched) {
  const KinetoSummary s = summarize_kineto(parse_kineto_trace(kineto_trace(phases()), "phases.json"));
  EXPECT_EQ(s.attribution, KinetoAttribution::Launches);
  EXPECT_DOUBLE_EQ(region_named(s, "attn(F)").mean_compute, 60);
  EXPECT_DOUBLE_EQ(region_named(s, "attn(F)").mean_communication, 0);
  expect_region_means(region_named(s, "dispatch(F)"), 0, 80, 40);
  expect_region_means(region_named(s, "step"), 60, 80, 40);  // the region around both owns both
  // Durations are the annotations' own, on the CPU.
  EXPECT_DOUBLE_EQ(region_named(s, "dispatch(F)").median_duration, 10);
  // Each stream's work, then the whole trace's.
  ASSERT_EQ(s.streams.size(), 2u);
  EXPECT_EQ(s.streams[0].tid, 7);
  EXPECT_DOUBLE_EQ(s.streams[0].compute, 60);
  EXPECT_EQ(s.streams[1].tid, 20);
  EXPECT_DOUBLE_EQ(s.streams[1].communication, 80);
  expect_trace_times(s, 60, 80, 40);
  EXPECT_DOUBLE_EQ(s.exposed, 40);
}

// Autograd's thread (200) launches the backward's kernels while the main thread waits inside attn(B) [30, 50]:
// they are attn(B)'s. A kernel whose launch is not in the trace belongs to no region, and still counts in the
// whole trace.
TEST(KinetoOwnership, WorkFromAThreadWithoutAnnotationsBelongsToTheAnnotationWaitingOnIt) {
  std::vector<std::string> events = phases();
  events.push_back(complete("user_annotation", "attn(B)", 100, 100, 30, 20));
  events.push_back(complete("cuda_runtime", "cudaLaunchKernel", 100, 200, 35, 1, 3));
  events.push_back(complete("kernel", kGemm, 0, 7, 300, 50, 3));
  events.push_back(complete("kernel", kGemm, 0, 7, 400, 25, 99));
  const KinetoSummary s = summarize_kineto(parse_kineto_trace(kineto_trace(events), "autograd.json"));
  EXPECT_DOUBLE_EQ(region_named(s, "attn(B)").mean_compute, 50);
  EXPECT_DOUBLE_EQ(region_named(s, "attn(F)").mean_compute, 60);
  EXPECT_DOUBLE_EQ(region_named(s, "step").mean_compute, 110);
  EXPECT_DOUBLE_EQ(s.compute, 135);
}

// The same phase name on two threads, each occurrence with its own work, and a region nested in another.
TEST(KinetoOwnership, RepeatedAndNestedAnnotationsOwnTheirOwnThreadsWork) {
  const KinetoSummary s = summarize_kineto(parse_kineto_trace(
      kineto_trace({complete("user_annotation", "mlp", 1, 1, 0, 100),
                    complete("user_annotation", "inner", 1, 1, 50, 20),
                    complete("cpu_op", "aten::mm", 1, 1, 10, 30), complete("cpu_op", "aten::mm", 1, 1, 55, 10),
                    complete("user_annotation", "mlp", 1, 2, 0, 100), complete("cpu_op", "aten::mm", 1, 2, 20, 70)}),
      "threads.json"));
  EXPECT_EQ(s.attribution, KinetoAttribution::Threads);
  EXPECT_EQ(region_named(s, "mlp").count, 2);
  EXPECT_DOUBLE_EQ(region_named(s, "mlp").mean_compute, (40 + 70) / 2.0);
  EXPECT_DOUBLE_EQ(region_named(s, "inner").mean_compute, 10);
}

TEST(KinetoOwnership, CommunicationLibrariesAndTheUsersPatterns) {
  for (const char* name : {kDispatch, kCombine, "void dpsk::ep::internode::cached_notify<false>(int)",
                           "nvshmemi_transfer_kernel", "cross_device_reduce_1stage"})
    EXPECT_TRUE(is_communication_name(name)) << name;
  for (const char* name : {kGemm, "void at::native::dispatch_kernel", "rotary_kernel"})
    EXPECT_FALSE(is_communication_name(name)) << name;

  const std::string trace = kineto_trace({complete("kernel", "my_exchange_kernel", 0, 7, 0, 10),
                                      complete("kernel", kGemm, 0, 8, 0, 10)});
  EXPECT_DOUBLE_EQ(summarize_kineto(parse_kineto_trace(trace, "t.json")).communication, 0);
  KinetoReadOptions options;
  options.communication_patterns = {"MY_EXCHANGE"};  // any case
  EXPECT_DOUBLE_EQ(summarize_kineto(parse_kineto_trace(trace, "t.json", options)).communication, 10);

  options.communication_patterns = {"my_(exchange"};
  try {
    parse_kineto_trace(trace, "t.json", options);
    FAIL() << "a pattern that is not a regular expression was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'my_(exchange' is not a regular expression"), std::string::npos) << e.what();
  }
  options.communication_patterns = {""};
  EXPECT_THROW(parse_kineto_trace(trace, "t.json", options), InvalidArgument);
  options.communication_patterns.assign(kMaxCommunicationPatterns + 1, "a");
  EXPECT_THROW(parse_kineto_trace(trace, "t.json", options), InvalidArgument);
}

// A copy on a stream that runs only NCCL's kernels is communication; one on a compute stream is not.
TEST(KinetoOwnership, CopiesOnACommunicationStreamAreCommunication) {
  const KinetoSummary s = summarize_kineto(parse_kineto_trace(
      kineto_trace({complete("kernel", "ncclDevKernel_SendRecv", 0, 30, 0, 10),
                complete("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 0, 30, 20, 5),
                complete("kernel", kGemm, 0, 7, 0, 10), complete("gpu_memset", "Memset (Device)", 0, 7, 20, 3)}),
      "copies.json"));
  EXPECT_DOUBLE_EQ(s.communication, 15);
  EXPECT_DOUBLE_EQ(s.compute, 13);
}

}  // namespace
}  // namespace dualpipe
