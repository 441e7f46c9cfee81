// What the expert all-to-alls cost one rank in a step (internal): their time, and the part of it that no thread
// of the rank spent computing, the *exposed* all-to-all time that the forward-backward overlap is meant to hide.
//
// A thread computes while it runs a compute action or one half of an overlapped forward-backward
// (runtime::ConcurrentOverlapStage), except while it waits in an all-to-all of its own: from the moment it began
// to wait for it (the start of the exchange, unless it computed in between: runtime/phases.h) to its end. An
// instant counts as exposed when some all-to-all is under way and no thread computes. Without the overlap, all of a rank's
// all-to-all time is exposed: its one thread waits.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dualpipe/comm/communicator.h"
#include "dualpipe/runtime/clock_sync.h"
#include "dualpipe/runtime/concurrent_overlap.h"
#include "dualpipe/trace/trace.h"

namespace dualpipe::train {

class ExpertTimeline {
 public:
  using Time = std::chrono::steady_clock::time_point;
  struct Span {
    std::thread::id thread;
    Time start, end;
  };
  struct Exchange {
    std::string what;  // "dispatch", "combine backward", ...
    bool backward_thread;  // a backward's (the trace's second communication track)
    Time start, waited_from, end;
    int step = 0;  // the executor's step counter
  };
  struct StepTotals {
    double all_to_all_ms = 0;  // the sum of the exchanges' durations
    double exposed_ms = 0;
  };

  // Both may be called from any thread (ExpertCommunication::on_exchange, ConcurrentOverlapStage's observer).
  void exchange(const std::string& what, Time start, Time waited_from, Time end);
  void halves(const runtime::OverlapHalves& halves);

  // The totals of executor step `step`, given the compute actions the main thread ran whole (the overlapped ones
  // that were split into halves left out); then starts the next step. The step's exchanges are kept for the
  // trace.
  StepTotals finish_step(const std::vector<Span>& main_thread_actions, int step);
  // Forgets what was recorded since the last step (the exchanges of evaluation forwards).
  void discard();
  const std::vector<Exchange>& exchanges() const { return kept_; }

 private:
  std::mutex mutex_;
  std::thread::id main_thread_ = std::this_thread::get_id();  // made by the thread that runs the executor
  std::vector<Span> exchanges_, waits_, halves_;
  std::vector<Exchange> step_exchanges_, kept_;
};

// Every rank's kept exchanges as trace spans on rank 0, on rank 0's clock (`clock`), track 1 for those of a
// backward half; other ranks get an empty list. Collective over `communicator` (a message tagged `tag`).
std::vector<TraceSpan> gather_all_to_all_spans(const ExpertTimeline& timeline, comm::Communicator& communicator,
                                               const runtime::ClockSync& clock, int tag,
                                               std::chrono::milliseconds timeout);

}  // namespace dualpipe::train
