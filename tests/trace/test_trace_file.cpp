// The trace layer on its own (until now tested through the simulator's and the pictures' tests): a trace written
// and read back holds the same events, and a run with data parallelism keeps its UNSHARD, RESHARD and REDUCE_GRAD
// actions, in the events and in the plan the trace names, as the trainer records them.
#include <gtest/gtest.h>

#include <string>

#include "dualpipe/schedule/data_parallel_lowering.h"
#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/lower.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/trace/trace.h"
#include "dualpipe/trace/trace_plan.h"

namespace dualpipe {
namespace {

TEST(TraceFile, AZeroThreeRunReadsBackWithItsDataParallelActions) {
  const Schedule planned = add_data_parallel_actions(make_schedule("1f1b", {2, 2}), 2, ZeroStage::Parameters);
  Trace trace = trace_header(planned);
  // Rank 0's lowered actions, one event each 10 us apart, as the executor records them.
  const Schedule lowered = lower_communication(planned);
  for (std::size_t i = 0; i < lowered.actions[0].size(); ++i)
    trace.events.push_back({lowered.actions[0][i], 0, static_cast<int>(i), 1, 10.0 * i, 5.0});
  const Trace read = parse_trace(format_trace(trace), "run.json");
  ASSERT_EQ(read.events.size(), trace.events.size());
  for (std::size_t i = 0; i < read.events.size(); ++i) {
    EXPECT_EQ(to_string(read.events[i].action), to_string(trace.events[i].action)) << i;
    EXPECT_DOUBLE_EQ(read.events[i].start, trace.events[i].start) << i;
  }
  EXPECT_EQ(to_string(read.events.front().action), "0UNSHARD");
  // The plan the trace names is the schedule with its data-parallel actions, without the messages.
  const Schedule plan = plan_of_trace(read, "run.json", "");
  EXPECT_EQ(format_text(plan), format_text(planned));
}

}  // namespace
}  // namespace dualpipe
