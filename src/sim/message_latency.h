// The time a pipeline message takes, read from a traced run without send or receive events: from a producer's end
// to its consumer's start on another rank, where the consumer was idle waiting for it. CostModel::comm for
// `plan --from-kineto` (kineto_plan.cpp), where the traces mark no message regions.
#pragma once

#include <optional>
#include <vector>

#include "dualpipe/schedule/schedule.h"
#include "dualpipe/trace/kineto.h"

namespace dualpipe {

struct MessageLatency {
  double value = 0;  // microseconds: the median wait
  int waits = 0;     // the waits it is the median of
  int steps = 0;     // the steps whose actions matched the schedule on every rank
};

// `ranks[r]` is rank r's trace of `schedule`, with `clock_offsets[r]` added to its times to put them on one clock.
// Each step (ProfilerStep, the k-th of every rank together) whose compute regions are, rank by rank and in time
// order, the schedule's actions as the runtime names them (profiler_region) is read: for each action whose latest
// input comes from another rank, and whose rank had finished its previous action by then, the time from that
// input's producer's end to the action's start (the message, and the host's time to take it in and start). None
// without any such wait.
std::optional<MessageLatency> message_latency(const Schedule& schedule, const std::vector<const KinetoSummary*>& ranks,
                                              const std::vector<double>& clock_offsets);

}  // namespace dualpipe
