// PyTorch profiler traces (torch.profiler / Kineto's Chrome trace JSON): the events `dualpipe profile` reads, and
// what each record_function region's work spent computing and communicating, and how much of its communication
// overlapped compute. docs/profile.md.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dualpipe {

// Bounds of the reader (docs/limits.md): a profiler's trace of a few steps is tens of MiB.
constexpr std::size_t kMaxKinetoBytes = std::size_t{256} << 20;
constexpr int kMaxKinetoDepth = 32;
constexpr int kMaxKinetoRanks = 4096;  // traces read side by side (one per rank)
constexpr double kMaxKinetoDurationUs = 86400e6;  // an event's dur: a day
constexpr double kMaxKinetoTimeUs = 1e17;         // |ts|: about 3,000 years of microseconds from the clock's zero
constexpr std::size_t kMaxKinetoKindLength = 64;  // dualpipe.kind, the schedule's name, and dualpipe.host
constexpr int kMaxKinetoHostCores = 1 << 16;

enum class KinetoKind {
  Region,         // a user annotation (record_function), on the CPU or its GPU range (gpu_user_annotation)
  Compute,        // an operator on the CPU (cpu_op, outermost only), or GPU work: a kernel, memcpy or memset
  Communication,  // a collective or point-to-point: NCCL and DeepEP kernels, gloo's and c10d's operators
  Launch,         // a CUDA runtime or driver call on the CPU (cuda_runtime, cuda_driver): where GPU work came from
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
  // args["correlation"]: the same number on a piece of GPU work and on the launch that made it; 0 when absent.
  long long correlation = 0;
};

struct KinetoTrace {
  std::vector<KinetoEvent> events;  // complete events of the kinds above, in file order
  bool has_gpu_kernels = false;     // then compute and communication are measured on the GPU alone
  int rank = -1;                    // distributedInfo.rank, which torch.profiler writes in a distributed job
  std::string schedule;             // dualpipe.schedule: the text form of the schedule `dualpipe train` ran
  std::string schedule_kind;        // dualpipe.kind: its name
  // dualpipe.host and .host_cores: where a rank computed on the CPU, its machine and the cores it could run on,
  // which the ranks of one machine shared (empty and 0: not recorded, or each rank had a device of its own).
  std::string host;
  int host_cores = 0;
};

// What the reader counts as communication besides the built-in names: the user's patterns (ECMAScript regular
// expressions searched in kernel and operator names, `--comm-kernel`).
struct KinetoReadOptions {
  std::vector<std::string> communication_patterns;
};
constexpr std::size_t kMaxCommunicationPatterns = 16;
constexpr std::size_t kMaxCommunicationPatternLength = 256;

// The names communication libraries give their operators, kernels and annotations: nccl..., gloo:..., c10d::...,
// record_param_comms, and DeepEP's kernels (deep_ep::, and DeepSeek's ::ep:: namespace: dispatch, combine and
// their notify and layout kernels). Annotations (record_function regions) count as communication only with these.
bool is_library_communication_name(std::string_view name);
// An operator's or kernel's name: the above, and names of all_reduce, all_gather, reduce_scatter, all_to_all,
// broadcast, send and recv in their spellings, and NVSHMEM's and custom all-reduce kernels.
bool is_communication_name(std::string_view name);

// Whether the file's start reads as a PyTorch profiler trace (its events carry a "cat") rather than a dualpipe
// trace: where both readers refuse a file, only the profiler reader's reason is worth giving for it.
bool looks_like_profiler_trace(const std::string& path);

// Strict: the file is one object whose traceEvents is an array; every complete ("X") event of a category used
// (cpu_op, kernel, gpu_memcpy, gpu_memset, cuda_runtime, cuda_driver, user_annotation, gpu_user_annotation) needs
// a string name, finite ts and dur >= 0 and integer or string pid/tid; other events are skipped. GPU work on a
// stream whose kernels are all communication is communication (its copies and memsets too). Errors name `source`,
// the event (traceEvents[i].field) and the rule; a bad pattern of `options` names the pattern.
KinetoTrace parse_kineto_trace(std::string_view text, const std::string& source, const KinetoReadOptions& options = {});
KinetoTrace read_kineto_trace(const std::string& path, const KinetoReadOptions& options = {});

// How a region's work is found (docs/profile.md, "What is read").
enum class KinetoAttribution {
  Launches,   // GPU work belongs to the CPU annotations open where it was launched (correlation ids)
  GpuRanges,  // GPU kernels without correlation ids: those inside a region's GPU range (gpu_user_annotation)
  Threads,    // no GPU kernels: the CPU operators run inside an annotation on its thread
};

// One region name's occurrences ("ProfilerStep#3" counts as "ProfilerStep"; on a GPU, the ranges of one
// occurrence on several streams are one occurrence from the first start to the last end), with the work that each
// occurrence owns: compute, communication, and the communication that overlapped compute (on another thread or
// stream). Work is owned by the annotation open where it was launched or run and by every annotation around it,
// on its thread; work from a thread with no annotation open (autograd's backward thread, gloo's worker thread)
// by the annotation open at that moment on the thread that issued it (the one blocked in backward(), the one
// that called the collective).
struct KinetoRegion {
  std::string name;
  int count = 0;
  std::vector<double> durations;  // microseconds, each occurrence's, process by process in time order
  std::vector<double> starts;     // each occurrence's start, in the same order (on the GPU where timed there)
  double median_duration = 0;
  double mean_duration = 0;
  // Means per occurrence of the time of its work: summed over its kernels (or operators), so work on two streams
  // at once counts twice; overlapped <= communication.
  double mean_compute = 0, mean_communication = 0, mean_overlapped = 0;
};

// The GPU work of one stream (or, on the CPU, the operators of one thread), summed.
struct KinetoStream {
  long long pid = 0, tid = 0;
  int events = 0;
  double compute = 0, communication = 0;  // microseconds
};

struct KinetoSummary {
  KinetoAttribution attribution = KinetoAttribution::Threads;
  std::vector<KinetoRegion> regions;  // in order of first appearance
  std::vector<KinetoStream> streams;  // by process, then stream or thread
  // Over the whole trace, summed over processes (microseconds): the time during which some compute (some
  // communication) ran, the communication that ran while compute did, and the rest of it (exposed).
  double compute = 0, communication = 0, overlapped = 0, exposed = 0;
  int processes = 0;
};

KinetoSummary summarize_kineto(const KinetoTrace& trace);

}  // namespace dualpipe
