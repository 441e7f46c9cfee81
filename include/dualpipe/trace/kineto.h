// PyTorch profiler traces (torch.profiler / Kineto's Chrome trace JSON): the events `dualpipe profile` reads, and
// what a named region of them spent computing and communicating, and how much of its communication overlapped
// compute. docs/profile.md.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dualpipe {

// Bounds of the reader (docs/limits.md): a profiler's trace of a few steps is tens of MiB.
constexpr std::size_t kMaxKinetoBytes = std::size_t{256} << 20;
constexpr int kMaxKinetoDepth = 32;

enum class KinetoKind {
  Region,         // a user annotation (record_function), on the CPU or its GPU range (gpu_user_annotation)
  Compute,        // an operator on the CPU (cpu_op, outermost only) or a GPU kernel
  Communication,  // a collective or point-to-point: NCCL kernels, gloo's and c10d's operators and annotations
};

struct KinetoEvent {
  std::string name;
  KinetoKind kind = KinetoKind::Compute;
  bool gpu = false;    // a GPU kernel or GPU annotation
  long long pid = 0;   // the process (a rank), or the GPU's for device events
  long long tid = 0;   // the thread, or the stream
  double start = 0;    // microseconds
  double duration = 0;
  // args["External id"]: the CPU-side record a GPU range belongs to (one per stream the region's kernels used);
  // 0 when absent.
  long long external_id = 0;
};

struct KinetoTrace {
  std::vector<KinetoEvent> events;  // complete events of the kinds above, in file order
  bool has_gpu_kernels = false;     // then compute and communication are measured on the GPU alone
};

// The names communication libraries give their operators, kernels and annotations: nccl..., gloo:..., c10d::...,
// record_param_comms. Annotations (record_function regions) count as communication only with these.
bool is_library_communication_name(std::string_view name);
// An operator's or kernel's name: the above, and names of all_reduce, all_gather, reduce_scatter, all_to_all,
// broadcast, send and recv in their spellings.
bool is_communication_name(std::string_view name);

// Strict: the file is one object whose traceEvents is an array; every complete ("X") event of a category used
// (cpu_op, kernel, user_annotation, gpu_user_annotation) needs a string name, finite ts and dur >= 0 and integer
// or string pid/tid; other events are skipped. Errors name `source`, the event (traceEvents[i].field) and the rule.
KinetoTrace parse_kineto_trace(std::string_view text, const std::string& source);
KinetoTrace read_kineto_trace(const std::string& path);

// One region name's occurrences ("ProfilerStep#3" counts as "ProfilerStep"; on a GPU, the ranges of one
// occurrence on several streams are one occurrence from the first start to the last end), with each occurrence's time split
// by what ran inside its interval in its process: compute, communication, and the communication that overlapped
// compute (on another thread or stream).
struct KinetoRegion {
  std::string name;
  int count = 0;
  std::vector<double> durations;  // microseconds, each occurrence's, process by process in time order
  double median_duration = 0;
  double mean_duration = 0;
  double mean_compute = 0, mean_communication = 0, mean_overlapped = 0;
};

struct KinetoSummary {
  std::vector<KinetoRegion> regions;  // in order of first appearance
  // Over the whole trace, summed over processes (microseconds).
  double compute = 0, communication = 0, overlapped = 0;
  int processes = 0;
};

KinetoSummary summarize_kineto(const KinetoTrace& trace);

}  // namespace dualpipe
