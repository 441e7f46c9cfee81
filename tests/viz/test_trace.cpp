// Trace JSON (docs/trace-format.md): writing and reading back, measured timelines, fitted costs, and errors
// that name the file and the field.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/sim/trace_costs.h"
#include "dualpipe/trace/trace.h"
#include "dualpipe/viz/trace_timeline.h"
#include "test_helpers.h"

namespace dualpipe::test {
namespace {

Trace simulated_trace(const std::string& kind, int ranks, int microbatches, const CostModel& costs,
                      double us_per_unit = 100) {
  const Schedule s = make_schedule(kind, ScheduleOptions{ranks, microbatches});
  return trace_from_simulation(s, simulate(s, costs), us_per_unit);
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "dualpipe_trace_" + name;
}

TEST(Trace, RoundTripsThroughJson) {
  const Trace written = simulated_trace("dualpipe", 4, 8, CostModel::parse("F=1,B=2,W=1,FB=2.5"));
  const Trace read = parse_trace(format_trace(written), "memory");
  EXPECT_EQ(read.kind, "dualpipe");
  EXPECT_EQ(read.num_ranks, 4);
  EXPECT_EQ(read.num_stages, 4);
  EXPECT_EQ(read.num_microbatches, 8);
  EXPECT_EQ(read.schedule, written.schedule);
  ASSERT_EQ(read.events.size(), written.events.size());
  for (std::size_t i = 0; i < read.events.size(); ++i) {
    EXPECT_EQ(to_string(read.events[i].action), to_string(written.events[i].action)) << i;  // peers: not stored
    EXPECT_EQ(read.events[i].rank, written.events[i].rank) << i;
    EXPECT_EQ(read.events[i].index, written.events[i].index) << i;
    EXPECT_EQ(read.events[i].step, written.events[i].step) << i;
    EXPECT_DOUBLE_EQ(read.events[i].start, written.events[i].start) << i;
    EXPECT_DOUBLE_EQ(read.events[i].duration, written.events[i].duration) << i;
  }
}

TEST(Trace, FileRoundTripAndDocumentedShape) {
  const Trace written = simulated_trace("1f1b", 2, 4, CostModel{});
  const std::string path = temp_path("roundtrip.json");
  write_trace_file(path, written);
  const Trace read = read_trace(path);
  EXPECT_EQ(read.events.size(), written.events.size());
  const std::string text = format_trace(written);
  for (const char* key : {"\"displayTimeUnit\"", "\"traceEvents\"", "\"ph\": \"M\"", "\"cat\": \"compute\"",
                          "\"cat\": \"comm\"", "\"name\": \"0F0\"", "\"name\": \"0SEND_F0\""}) {
    EXPECT_TRUE(contains(text, key)) << key;
  }
  std::remove(path.c_str());
}

TEST(Trace, SimulatedRunGivesTheSimulatedTimelineInMicroseconds) {
  const CostModel costs = CostModel::parse("F=1,B=2,W=1,FB=2.5");
  const Schedule s = make_schedule("dualpipe", ScheduleOptions{4, 8});
  const Simulation sim = simulate(s, costs);
  const Timeline planned = timeline_from_simulation(s, sim, costs);
  const Timeline measured = timeline_from_trace(trace_from_simulation(s, sim, 100), 0);
  EXPECT_EQ(measured.time_unit, "us");
  ASSERT_EQ(measured.rows.size(), planned.rows.size());
  for (std::size_t r = 0; r < planned.rows.size(); ++r) {
    ASSERT_EQ(measured.rows[r].cells.size(), planned.rows[r].cells.size());
    for (std::size_t i = 0; i < planned.rows[r].cells.size(); ++i) {
      const TimelineCell& p = planned.rows[r].cells[i];
      const TimelineCell& m = measured.rows[r].cells[i];
      EXPECT_EQ(m.action, p.action);
      EXPECT_EQ(m.index, p.index);
      EXPECT_NEAR(m.start, 100 * p.start, 1e-9);
      EXPECT_NEAR(m.end, 100 * p.end, 1e-9);
      EXPECT_EQ(m.direction, p.direction) << to_string(p.action);
      EXPECT_NEAR(m.split, p.split, 1e-9);
    }
  }
  EXPECT_NEAR(measured.stats.bubble, 100 * sim.metrics.bubble, 1e-6);
  EXPECT_NEAR(measured.stats.bubble_rate, sim.metrics.bubble_rate, 1e-12);
  EXPECT_EQ(measured.stats.peak_activations, sim.metrics.peak_activations());
  EXPECT_TRUE(contains(measured.title, "measured: dualpipe"));
  EXPECT_TRUE(contains(measured.summary, " us"));
}

TEST(Trace, TimelineStatsMatchTheSimulator) {
  for (const char* kind : {"gpipe", "1f1b", "zb-h1", "dualpipe", "dualpipev"}) {
    const CostModel costs = CostModel::parse("F=1,B=2,W=1,FB=2.5,comm=0.1");
    const Schedule s = make_schedule(kind, ScheduleOptions{4, 8});
    const Simulation sim = simulate(s, costs);
    const Timeline t = timeline_from_simulation(s, sim, costs);
    EXPECT_NEAR(t.stats.makespan, sim.metrics.makespan, 1e-9) << kind;
    EXPECT_NEAR(t.stats.bubble, sim.metrics.bubble, 1e-9) << kind;
    EXPECT_NEAR(t.stats.bubble_rate, sim.metrics.bubble_rate, 1e-12) << kind;
    EXPECT_EQ(t.stats.peak_activations, sim.metrics.peak_activations()) << kind;
  }
}

TEST(Trace, FittedCostsRecoverTheMeasuredDurations) {
  const CostModel costs = CostModel::parse("F=1,B=2,W=0.75,FB=2.5,scale=1:1:2:1");
  const Trace trace = simulated_trace("dualpipe", 4, 8, costs, 10);
  const CostFit fit = fit_costs(trace, 0);
  const CostModel& fitted = fit.costs;
  for (int s = 0; s < 4; ++s) {
    SCOPED_TRACE("stage " + std::to_string(s));
    EXPECT_NEAR(fitted.forward_of(s), 10 * costs.forward_of(s), 1e-9);
    EXPECT_NEAR(fitted.backward_of(s), 10 * costs.backward_of(s), 1e-9);
    EXPECT_NEAR(fitted.weight_of(s), 10 * costs.weight_of(s), 1e-9);
  }
  ASSERT_TRUE(fitted.overlapped.has_value());
  EXPECT_NEAR(*fitted.overlapped / fitted.forward, 2.5, 1e-9);
  EXPECT_NEAR(fit.residual, 0, 1e-12);  // every action of a type took the same time on its stage
  EXPECT_TRUE(fit.warnings.empty());
  // Simulating the trace's own schedule with the fitted costs gives back the measured run.
  const Schedule plan = parse_text(trace.schedule);
  EXPECT_NEAR(simulate(plan, fitted).metrics.makespan, 10 * simulate(plan, costs).metrics.makespan, 1e-6);
}

// A stage whose F, I and W do not scale alike (an embedding stage: a cheap forward, a large weight gradient) and
// durations that vary from one micro-batch to the next: each stage's I and W come back within 5%, I is not lost
// to W, and the residual reports the variation.
TEST(Trace, FittedInputAndWeightGradientsOfUnevenNoisyStagesAreWithinFivePercent) {
  const CostModel truth = CostModel::parse("F=0.3:1:1:1,B=2.5:2:2:2,W=1.8:1:1:1");
  Trace trace = simulated_trace("zb-h1", 4, 8, truth, 1000);
  int k = 0;
  for (TraceEvent& e : trace.events)
    if (e.action.is_compute()) e.duration *= 1 + 0.04 * std::sin(1.7 * k++);  // +-4%, RMS about 2.8%
  const CostFit fit = fit_costs(trace, 0);
  for (int s = 0; s < 4; ++s) {
    SCOPED_TRACE("stage " + std::to_string(s));
    const double input = truth.backward_of(s) - truth.weight_of(s);
    const double fitted_input = fit.costs.backward_of(s) - fit.costs.weight_of(s);
    EXPECT_NEAR(fit.costs.forward_of(s), 1000 * truth.forward_of(s), 0.05 * 1000 * truth.forward_of(s));
    EXPECT_NEAR(fitted_input, 1000 * input, 0.05 * 1000 * input);
    EXPECT_NEAR(fit.costs.weight_of(s), 1000 * truth.weight_of(s), 0.05 * 1000 * truth.weight_of(s));
  }
  EXPECT_GT(fit.residual, 0.015);
  EXPECT_LT(fit.residual, 0.04);
  EXPECT_TRUE(fit.warnings.empty());
}

TEST(Trace, FittingAStepWithoutSplitBackwardsSaysWIsAssumed) {
  const CostFit fit = fit_costs(simulated_trace("1f1b", 2, 4, CostModel{}), 0);
  ASSERT_EQ(fit.warnings.size(), 1u);
  EXPECT_TRUE(contains(fit.warnings[0], "split no backward")) << fit.warnings[0];
  EXPECT_NEAR(fit.costs.weight, fit.costs.backward / 2, 1e-9);
}

TEST(Trace, PicksOneStep) {
  Trace trace = simulated_trace("1f1b", 2, 2, CostModel{});
  Trace second = simulated_trace("1f1b", 2, 2, CostModel{});
  for (TraceEvent& e : second.events) e.step = 1, e.start += 5000;
  trace.events.insert(trace.events.end(), second.events.begin(), second.events.end());
  EXPECT_EQ(trace.steps(), (std::vector<int>{0, 1}));
  const Timeline t = timeline_from_trace(trace, 1);
  EXPECT_DOUBLE_EQ(t.begin(), 0);
  EXPECT_EQ(t.num_cells(), 8u);
  EXPECT_TRUE(contains(error_message([&] { timeline_from_trace(trace, 7); }), "no compute events for step 7"));
}

// An error message for the trace `json`, which must name the source and the `field`.
void expect_error(const std::string& json, const std::string& field) {
  const std::string message = error_message([&] { parse_trace(json, "bad.json"); });
  EXPECT_TRUE(contains(message, "bad.json")) << message;
  EXPECT_TRUE(contains(message, field)) << "expected '" << field << "' in: " << message;
}

std::string with_event(const std::string& event) {
  return R"({"traceEvents": [{"name": "rank 0", "ph": "M", "pid": 0, "tid": 0}, )" + event + "]}";
}

TEST(Trace, ErrorsNameTheFileAndTheField) {
  expect_error("{not json", "not valid JSON");
  expect_error("[1, 2]", "expected an object");
  expect_error(R"({"dualpipe": {}})", "traceEvents: missing");
  expect_error(R"({"traceEvents": 3})", "traceEvents: expected an array");
  expect_error(R"({"dualpipe": {"ranks": "four"}, "traceEvents": []})", "dualpipe.ranks: expected an integer");
  expect_error(with_event(R"({"name": "0F3", "ph": "X", "pid": 0, "ts": "x", "dur": 1, "args": {"index": 0}})"),
               "traceEvents[1].ts: expected a number");
  expect_error(with_event(R"({"name": "0F3", "ph": "X", "pid": 0, "ts": 1, "dur": -2, "args": {"index": 0}})"),
               "traceEvents[1].dur: a duration cannot be negative");
  expect_error(with_event(R"({"name": "0Q3", "ph": "X", "pid": 0, "ts": 1, "dur": 2, "args": {"index": 0}})"),
               "traceEvents[1].name");
  expect_error(with_event(R"({"name": "0F3", "ph": "X", "pid": 0, "ts": 1, "args": {"index": 0}})"),
               "traceEvents[1]: missing field 'dur'");
  expect_error(with_event(R"({"name": "0F3", "ph": "X", "pid": 0, "ts": 1, "dur": 2})"),
               "traceEvents[1]: missing 'args.index'");
  expect_error(with_event(R"({"name": "0F3", "ph": "X", "ts": 1, "dur": 2, "args": {"index": 0}})"),
               "names no rank");
  expect_error(R"({"dualpipe": {"ranks": 2}, "traceEvents": [{"name": "0F3", "ph": "X", "pid": 0, "ts": 1,
                 "dur": 2, "args": {"rank": 5, "index": 0}}]})",
               "traceEvents[0].args.rank: rank 5 is outside the 2 ranks");
}

// A wrong field that is a container is described, not printed: printing a deeply nested one recursed once per
// level and overflowed the stack (found by AddressSanitizer, scripts/test_sanitized.sh).
TEST(Trace, DeeplyNestedWrongFieldIsDescribedNotPrinted) {
  // Within the depth limit (32 levels), a wrong container is described by its size.
  const std::string nested = std::string(20, '[') + std::string(20, ']');
  expect_error(nested, "(top level): expected an object with 'traceEvents', got an array of 1 elements");
  expect_error(with_event(R"({"name": "0F3", "ph": "X", "pid": 0, "dur": 1, "args": {"index": 0}, "ts": )" + nested +
                          "}"),
               "traceEvents[1].ts: expected a number, got an array of 1 elements");
  // Deeper than the limit, the parser stops at level 33 (the value would otherwise be built 200,000 levels deep).
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  expect_error(deep, "nests JSON values deeper than the limit of 32 levels");
  expect_error(with_event(R"({"name": "0F3", "ph": "X", "pid": 0, "dur": 1, "args": {"index": 0}, "ts": )" + deep +
                          "}"),
               "nests JSON values deeper than the limit of 32 levels");
  expect_error(R"({"traceEvents": {"a": 1, "b": 2}})", "traceEvents: expected an array, got an object with 2 fields");
}

TEST(Trace, DuplicatedEventsAndEventsOutsideTheHeaderAreErrors) {
  const std::string header = R"("dualpipe": {"ranks": 2, "stages": 2, "microbatches": 2}, )";
  auto trace_of = [&](const std::string& events) { return "{" + header + R"("traceEvents": [)" + events + "]}"; };
  const std::string f0 = R"({"name": "0F0", "ph": "X", "ts": 0, "dur": 1, "args": {"rank": 0, "index": 0}})";
  const std::string f1 = R"({"name": "0F1", "ph": "X", "ts": 1, "dur": 1, "args": {"rank": 0, "index": 1}})";
  EXPECT_NO_THROW(parse_trace(trace_of(f0 + ", " + f1), "ok.json"));
  expect_error(trace_of(f0 + ", " + f1 + ", " + f0),
               "traceEvents[2]: rank 0 step 0 index 0 ('0F0') is recorded twice: traceEvents[0]");
  // The same index in another step is another event.
  const std::string f0_step1 =
      R"({"name": "0F0", "ph": "X", "ts": 9, "dur": 1, "args": {"rank": 0, "index": 0, "step": 1}})";
  EXPECT_NO_THROW(parse_trace(trace_of(f0 + ", " + f0_step1), "ok.json"));
  expect_error(trace_of(R"({"name": "2F0", "ph": "X", "ts": 0, "dur": 1, "args": {"rank": 0, "index": 0}})"),
               "traceEvents[0].name: stage 2 of '2F0' is outside the 2 stages of dualpipe.stages");
  expect_error(trace_of(R"x({"name": "(0F1;1B2)", "ph": "X", "ts": 0, "dur": 1, "args": {"rank": 0, "index": 0}})x"),
               "traceEvents[0].name: micro-batch 2 of '(0F1;1B2)' is outside the 2 micro-batches");
}

// Found by fuzz_trace (build-fuzz/findings/fuzz_trace-slow-unit-9b7c6c2d...): without a header's "ranks", a rank
// number of 1222222 in one event made the timeline keep 1.2 million ranks (0.6 s and 250 MB for 400 bytes).
TEST(Trace, RankNumbersAboveTheReadersRankLimitAreRefused) {
  expect_error(R"({"traceEvents": [{"name": "0F0", "ph": "X", "ts": 0, "dur": 1, "tkd": 0,
                                    "args": {"rank": 1222222, "index": 1, "step": 0}}]})",
               "traceEvents[0].args.rank: expected at most 4095 (the limit of 4096 ranks), got 1222222");
  expect_error(R"({"traceEvents": [{"name": "0F0", "ph": "X", "ts": 0, "dur": 1, "pid": 5000, "args": {"index": 1}}]})",
               "traceEvents[0].pid: expected at most 4095 (the limit of 4096 ranks), got 5000");
  expect_error(R"({"dualpipe": {"ranks": 100000}, "traceEvents": []})",
               "dualpipe.ranks: expected at most 4096 (the limit of 4096 ranks), got 100000");
  EXPECT_NO_THROW(parse_trace(R"({"traceEvents": [{"name": "0F0", "ph": "X", "ts": 0, "dur": 1,
                                                   "args": {"rank": 4095, "index": 0}}]})", "ok.json"));
}

// Found after fuzz_trace's 11-minute run reached 1.9 GB of memory on one input (just under its 2 GB limit, so not
// saved): a stage number is kept per stage by the fitted costs, so one forward '300000000F0' in 190 bytes made
// draw --trace take 2.3 GB. Stage and micro-batch numbers are bounded as in schedule files (docs/limits.md).
TEST(Trace, StageAndMicroBatchNumbersFarAboveTheEventsAreRefused) {
  expect_error(with_event(R"({"name": "300000000F0", "ph": "X", "ts": 0, "dur": 1, "pid": 0, "args": {"index": 0}})"),
               "stage 300000000 of '300000000F0' (traceEvents[1]) is out of range: stages 0..300000000 and "
               "micro-batches 0..0 make 300000001 (stage, micro-batch) pairs, each needing a forward and a backward, "
               "but the actions name only 1 (at most 4 x 1 + 4096 pairs are read)");
  expect_error(with_event(R"({"name": "0F300000000", "ph": "X", "ts": 0, "dur": 1, "pid": 0, "args": {"index": 0}})"),
               "micro-batch 300000000 of '0F300000000' (traceEvents[1]) is out of range");
  // The pair of an overlapped action counts too.
  expect_error(with_event(R"j({"name": "(0F0;300000000B0)", "ph": "X", "ts": 0, "dur": 1, "pid": 0,
                               "args": {"index": 0}})j"),
               "stage 300000000 of '(0F0;300000000B0)' (traceEvents[1]) is out of range");
  // Up to 4 x the actions + 4096 (stage, micro-batch) pairs are read: 4097 for one event.
  EXPECT_NO_THROW(parse_trace(with_event(R"({"name": "4096F0", "ph": "X", "ts": 0, "dur": 1, "pid": 0,
                                             "args": {"index": 0}})"),
                              "ok.json"));
}

TEST(Trace, TooLargeInputIsRefusedBeforeParsing) {
  const std::string big(kMaxTraceBytes + 1, ' ');
  expect_error(big, "above the limit of 67108864 bytes (64 MiB)");
}

TEST(Trace, MissingFileIsNamed) {
  const std::string message = error_message([] { read_trace("/nonexistent/run.json"); });
  EXPECT_TRUE(contains(message, "/nonexistent/run.json")) << message;
}

TEST(Trace, EventsOutsideTheComputeThreadAreIgnoredByTheTimeline) {
  const Trace trace = simulated_trace("1f1b", 2, 2, CostModel{});
  std::size_t compute = 0;
  for (const TraceEvent& e : trace.events) compute += e.action.is_compute();
  EXPECT_LT(compute, trace.events.size()) << "the simulated trace carries messages too";
  EXPECT_EQ(timeline_from_trace(trace, 0).num_cells(), compute);
}

// The all-to-all spans an MoE run writes (tid 2 + track, category all_to_all) are read back, and a step's spans
// go to their rank's row on the cells' clock.
TEST(Trace, AllToAllSpansRoundTripAndJoinTheirRanksRow) {
  Trace trace = simulated_trace("1f1b", 2, 2, CostModel{}, 100);
  Trace second = simulated_trace("1f1b", 2, 2, CostModel{}, 100);
  for (TraceEvent& e : second.events) e.step = 1, e.start += 5000;
  trace.events.insert(trace.events.end(), second.events.begin(), second.events.end());
  trace.spans = {{"dispatch", 1, 0, 0, 20, 5},
                 {"combine backward", 1, 1, 1, 5150, 30},
                 {"dispatch", 0, 0, 1, 5010, 7}};
  const Trace read = parse_trace(format_trace(trace), "memory");
  ASSERT_EQ(read.spans.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(read.spans[i].name, trace.spans[i].name);
    EXPECT_EQ(read.spans[i].rank, trace.spans[i].rank);
    EXPECT_EQ(read.spans[i].track, trace.spans[i].track);
    EXPECT_EQ(read.spans[i].step, trace.spans[i].step);
    EXPECT_EQ(read.spans[i].start, trace.spans[i].start);
    EXPECT_EQ(read.spans[i].duration, trace.spans[i].duration);
  }
  EXPECT_EQ(read.events.size(), trace.events.size()) << "spans are not actions";

  // Step 1 begins at 5000 us (its first forward), so its spans sit 10 and 150 us into the step.
  const Timeline t = timeline_from_trace(read, 1);
  ASSERT_EQ(t.rows.size(), 2u);
  ASSERT_EQ(t.rows[0].spans.size(), 1u);
  EXPECT_EQ(t.rows[0].spans[0].name, "dispatch");
  EXPECT_DOUBLE_EQ(t.rows[0].spans[0].start, 10);
  EXPECT_DOUBLE_EQ(t.rows[0].spans[0].end, 17);
  ASSERT_EQ(t.rows[1].spans.size(), 1u);
  EXPECT_EQ(t.rows[1].spans[0].track, 1);
  EXPECT_DOUBLE_EQ(t.rows[1].spans[0].start, 150);
  EXPECT_DOUBLE_EQ(t.rows[1].spans[0].end, 180);
  EXPECT_TRUE(timeline_from_trace(read, 0).rows[0].spans.empty());
  EXPECT_EQ(timeline_from_trace(read, 0).rows[1].spans.size(), 1u);
}

TEST(Trace, BadSpansAreNamed) {
  const std::string span = R"({"name": "dispatch", "cat": "all_to_all", "ph": "X", "pid": 0, )";
  expect_error(with_event(span + R"("tid": 7, "ts": 1, "dur": 2, "args": {"rank": 0}})"),
               "traceEvents[1].tid: a span's tid is 2 or 3");
  expect_error(with_event(span + R"("ts": 1, "dur": 2, "args": {"rank": 0}})"), "traceEvents[1]: missing field 'tid'");
  expect_error(with_event(span + R"("tid": 2, "ts": 1, "dur": -1, "args": {"rank": 0}})"),
               "traceEvents[1].dur: a duration cannot be negative");
  expect_error(with_event(R"({"name": ")" + std::string(65, 'x') +
                          R"(", "cat": "all_to_all", "ph": "X", "pid": 0, "tid": 2, "ts": 1, "dur": 2})"),
               "traceEvents[1].name: a span's name is at most 64 characters, got 65");
  expect_error(R"({"dualpipe": {"ranks": 2}, "traceEvents": [)" + span +
                   R"("tid": 2, "ts": 1, "dur": 2, "args": {"rank": 3}}]})",
               "traceEvents[0].args.rank: rank 3 is outside the 2 ranks");
}

}  // namespace
}  // namespace dualpipe::test
