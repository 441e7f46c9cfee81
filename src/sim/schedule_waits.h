// The host's time between a rank's actions and a pipeline message's time, read from a traced run of a known
// schedule (no send or receive events needed): CostModel::gap and ::comm for `plan --from-kineto`
// (kineto_plan.cpp).
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "dualpipe/schedule/schedule.h"
#include "dualpipe/trace/kineto.h"
#include "dualpipe/trace/trace.h"

namespace dualpipe {

struct MeanWait {
  double value = 0;  // microseconds
  int count = 0;     // the waits it is the mean of
};

struct ScheduleWaits {
  // From an action's end to its rank's next action's start, where that one's inputs were all there by then: the
  // host's work between the two (and, on shared cores, the wait for one).
  std::optional<MeanWait> gap;
  // From an input's producer's end to its consumer's start on another rank, where the consumer's rank was idle
  // waiting for it: the message, and the host's time to take it in and start.
  std::optional<MeanWait> message;
  int steps = 0;  // the steps whose actions matched the schedule on every rank
};

struct TimedAction {
  Action action;
  double start = 0, end = 0;  // microseconds, on one clock for every rank
};
// [step][rank]: each rank's compute actions of the step, in the order it ran them.
using TimedSteps = std::vector<std::vector<std::vector<TimedAction>>>;

// The waits over every step: for each action whose latest input (spec section 2) came from another rank after its
// own rank had finished its previous action, a message's; for each other action but a rank's first, a gap.
// `message_part(start, end)`, where given, is how much of a message's wait to count (on shared cores: the part with a
// core free, the rest being a wait for a core).
using WaitPart = std::function<double(double start, double end)>;
ScheduleWaits schedule_waits(const TimedSteps& steps, int stages, const WaitPart& message_part = {});

// `ranks[r]` is rank r's trace of `schedule`, with `clock_offsets[r]` added to its times to put them on one clock;
// with data-parallel replicas, the traces of replica d are ranks[d * R] to ranks[d * R + R - 1] (the trainer's
// numbering without tensor or context parallelism). Each step (ProfilerStep, the k-th of every rank together) of a
// replica whose compute regions are, rank by rank and in time order, the schedule's actions as the runtime names
// them (profiler_region) is read. Means, not medians: a step adds these times up, the long ones too.
ScheduleWaits schedule_waits(const Schedule& schedule, const std::vector<const KinetoSummary*>& ranks,
                             const std::vector<double>& clock_offsets, const WaitPart& message_part = {});

// The same over a dualpipe trace: its compute actions by step and rank, in the order they started.
ScheduleWaits schedule_waits(const Trace& trace);

}  // namespace dualpipe
