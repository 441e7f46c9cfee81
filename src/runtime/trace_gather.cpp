#include "dualpipe/runtime/trace_gather.h"

#include <torch/torch.h>

#include <cmath>

#include "dualpipe/runtime/gather.h"

namespace dualpipe::runtime {
namespace {

constexpr int kTraceTag = comm::tag(comm::Channel::Gather);
constexpr int kFieldsPerEvent = 6;  // step, index, start, duration, bytes, completed: exact in doubles (< 2^53)

}  // namespace

std::vector<TraceEvent> trace_events(const Executor& executor, const ClockSync& clock) {
  const int rank = executor.pipeline_rank();
  const std::vector<Action>& actions = executor.lowered_schedule().actions[rank];
  std::vector<TraceEvent> events;
  events.reserve(executor.recorded_actions().size());
  // Whole nanoseconds: the clock's resolution, and a trace file without float noise in the last digits.
  const auto ns = [](double us) { return std::round(us * 1000.0) / 1000.0; };
  for (const ActionRecord& r : executor.recorded_actions()) {
    const double start = ns(clock.to_aligned_us(r.start));
    // A reduction not completed by now (the run is over) never will be: it has no end to show.
    const bool completed = r.completed.valid() &&
                           r.completed.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
    const double completed_after = completed ? ns(clock.to_aligned_us(r.completed.get()) - start) : -1;
    events.push_back({actions.at(r.index), rank, r.index, r.step, start, ns(clock.to_aligned_us(r.end) - start),
                      static_cast<double>(r.bytes), completed_after});
  }
  return events;
}

Trace trace_header(const Executor& executor) { return dualpipe::trace_header(executor.lowered_schedule()); }

Trace gather_trace(const Executor& executor, comm::Communicator& communicator, const ClockSync& clock,
                   std::chrono::milliseconds timeout) {
  // The first value names the sender's pipeline rank (it differs from the communicator rank under a rank_mapping).
  const std::vector<TraceEvent> mine = trace_events(executor, clock);
  torch::Tensor packed = torch::empty({1 + kFieldsPerEvent * static_cast<int64_t>(mine.size())}, torch::kDouble);
  double* p = packed.data_ptr<double>();
  *p++ = executor.pipeline_rank();
  for (const TraceEvent& e : mine) {
    *p++ = e.step;
    *p++ = e.index;
    *p++ = e.start;
    *p++ = e.duration;
    *p++ = e.bytes;
    *p++ = e.completed;
  }
  const std::vector<torch::Tensor> all = gather_to_root(communicator, packed, kTraceTag, timeout);
  if (communicator.rank() != 0) return {};

  Trace trace = trace_header(executor);
  const Schedule& lowered = executor.lowered_schedule();
  for (size_t from = 0; from < all.size(); ++from) {
    const torch::Tensor& t = all[from];
    const double* q = t.data_ptr<double>();
    const int64_t n = (t.numel() - 1) / kFieldsPerEvent;
    DUALPIPE_REQUIRE(t.numel() >= 1 && (t.numel() - 1) % kFieldsPerEvent == 0, "communicator rank ", from,
                     " sent a malformed trace (", t.numel(), " values)");
    const int rank = static_cast<int>(q[0]);
    DUALPIPE_REQUIRE(rank >= 0 && rank < lowered.num_ranks, "communicator rank ", from,
                     " sent events of pipeline rank ", rank, ", the schedule has ", lowered.num_ranks);
    for (int64_t i = 0; i < n; ++i) {
      const double* f = q + 1 + kFieldsPerEvent * i;
      const int index = static_cast<int>(f[1]);
      DUALPIPE_REQUIRE(index >= 0 && index < static_cast<int>(lowered.actions[rank].size()), "rank ", rank,
                       " recorded action index ", index, " beyond its ", lowered.actions[rank].size(),
                       " lowered actions: were all ranks running the same schedule?");
      trace.events.push_back(
          {lowered.actions[rank][index], rank, index, static_cast<int>(f[0]), f[2], f[3], f[4], f[5]});
    }
  }
  return trace;
}

}  // namespace dualpipe::runtime
