// Profiler traces of several ranks of one job (one file per rank, as torch.profiler writes them), side by side:
// each rank's summary, their clocks aligned on the collectives they share, and the slowest rank named
// (`dualpipe profile --kineto DIR`, docs/profile.md).
#pragma once

#include <string>
#include <vector>

#include "dualpipe/trace/kineto.h"

namespace dualpipe {

// One collective of a process group ("gloo:all_reduce", "nccl:reduce_scatter"; not a point-to-point message), on
// the rank's own clock, where the trace times it (the GPU's where it has kernels).
struct CollectiveSpan {
  std::string name;
  double start = 0, end = 0;  // microseconds
};

struct KinetoRankSummary {
  std::string source;
  int rank = 0;  // distributedInfo.rank, or the file's position among files that have none
  std::string schedule, schedule_kind;  // dualpipe.schedule and .kind, where `dualpipe train --kineto-trace` wrote it
  std::string host;                     // dualpipe.host and .host_cores (KinetoTrace)
  int host_cores = 0;
  KinetoSummary summary;
  std::vector<CollectiveSpan> collectives;  // in time order
  // Microseconds to add to this rank's times to put them on the first rank's clock: the median, over the
  // collectives both ran (the k-th communication of one matched with the k-th of the other), of the difference of
  // their ends, which a collective reaches on every rank at about the same moment. 0 for the first rank, and for
  // every rank where all recorded the same host (one clock).
  double clock_offset = 0;
  int collectives_matched = 0;
  // Microseconds: the median ProfilerStep region's duration, or (without one) the span of the rank's work.
  double step = 0;
};

struct KinetoRanks {
  std::vector<KinetoRankSummary> ranks;  // by rank
  std::string host;  // the host every rank recorded, where all recorded the same one (one clock); else empty
  std::size_t slowest = 0;               // index of the rank with the longest step
  double median_step = 0;
};

// Reads the files one at a time (each within the reader's limits; at most kMaxKinetoRanks). A directory stands for
// the *.pt.trace.json files in it (tensorboard_trace_handler's), or without any its *.json files, in name order.
// Throws InvalidArgument naming the file for a bad trace, and naming both files when two claim one rank.
KinetoRanks read_kineto_ranks(const std::vector<std::string>& paths, const KinetoReadOptions& options = {});

}  // namespace dualpipe
