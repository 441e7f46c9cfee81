// Turning the actions an Executor recorded (ExecutorOptions::record_trace) into the Chrome trace of
// docs/trace-format.md: this rank's events on the aligned clock, and every rank's events merged on rank 0.
#pragma once

#include <chrono>
#include <vector>

#include "dualpipe/comm/communicator.h"
#include "dualpipe/runtime/clock_sync.h"
#include "dualpipe/runtime/executor.h"
#include "dualpipe/trace/trace.h"

namespace dualpipe::runtime {

// The executor's recorded actions as trace events: rank = pipeline rank, times in microseconds on the clock
// `clock` aligns to rank 0's.
std::vector<TraceEvent> trace_events(const Executor& executor, const ClockSync& clock);

// The trace header (kind, sizes, compute-only schedule text) of the schedule the executor runs, no events.
Trace trace_header(const Executor& executor);

// Every rank of the communicator calls it with its executor (all running the same schedule). Communicator rank 0
// receives every rank's events and returns the merged trace (header + events, rank by rank); the others return
// an empty Trace. Write it with write_trace_file (trace.h). Throws CommError naming a rank that does not send
// within `timeout` (0: the communicator's).
Trace gather_trace(const Executor& executor, comm::Communicator& communicator, const ClockSync& clock,
                   std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

}  // namespace dualpipe::runtime
