// The executor's instrumentation: the measured live-activation counter against the simulator's count (spec
// section 2) for every schedule kind, the action recorder, the clock alignment and the merged trace.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "dualpipe/runtime/clock_sync.h"
#include "dualpipe/runtime/gather.h"
#include "dualpipe/runtime/trace_gather.h"
#include "dualpipe/runtime/unmetered_memory.h"
#include "dualpipe/schedule/action.h"
#include "dualpipe/schedule/data_parallel_lowering.h"
#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/lower.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/viz/trace_timeline.h"
#include "runtime/support/kind_cases.h"
#include "runtime/support/reference_model.h"
#include "runtime/support/thread_ranks.h"

namespace dualpipe::testing {
namespace {

// One rank's executor over private copies of the setup's stages (the copies outlive the executor's use).
struct RankRun {
  std::map<int, runtime::MlpStage> modules;
  std::unique_ptr<runtime::Executor> executor;

  RankRun(const ReferenceSetup& setup, const Schedule& schedule, std::shared_ptr<comm::Communicator> comm,
          bool record) {
    at::set_num_threads(1);
    std::map<int, std::shared_ptr<runtime::Stage>> stages;
    for (int m = 0; m < schedule.num_microbatches; ++m)
      for (int s = 0; s < schedule.num_stages; ++s)
        if (schedule.placement.rank(s, m) == comm->rank() && !modules.count(s)) {
          runtime::MlpStage copy(setup.hidden);
          torch::NoGradGuard no_grad;
          auto src = setup.model[s]->parameters(), dst = copy->parameters();
          for (size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
          modules.emplace(s, copy);
          stages.emplace(s, runtime::make_stage(copy));
        }
    runtime::ExecutorOptions options;
    options.boundaries =
        runtime::ExecutorOptions::uniform({{{setup.rows, setup.hidden}, torch::kFloat}}, schedule.num_stages);
    options.record_trace = record;
    options.measure_memory = true;
    executor = std::make_unique<runtime::Executor>(schedule, stages, comm, options);
  }

  runtime::StepResult step(const ReferenceSetup& setup, const std::function<void(runtime::StepArgs&)>& hooks = {}) {
    runtime::StepArgs args;
    if (hooks) hooks(args);
    args.inputs = {select_microbatches(setup.inputs, executor->entering_microbatches(), setup.num_microbatches)};
    args.labels = {select_microbatches(setup.labels, executor->loss_microbatches(), setup.num_microbatches)};
    args.criterion = runtime::single_tensor_criterion(mse);
    args.num_microbatches = setup.num_microbatches;
    return executor->step(args);
  }
};

class LiveActivations : public ::testing::TestWithParam<KindCase> {};

TEST_P(LiveActivations, MeasuredPeakEqualsTheSimulatorsCount) {
  const Schedule schedule = make_case_schedule(GetParam().kind, GetParam().ranks);
  const std::vector<int> expected = peak_activations(schedule);
  const ReferenceSetup setup = make_setup(schedule.num_stages, schedule.num_microbatches, 8, 2, 7);
  auto problems = run_ranks(schedule.num_ranks, [&](std::shared_ptr<comm::Communicator> comm) {
    RankRun run(setup, schedule, comm, false);
    std::vector<std::string> out;
    for (int step = 0; step < 2; ++step) {  // the counter restarts with every step
      run.step(setup);
      const runtime::StepStats& stats = run.executor->last_step_stats();
      if (stats.peak_live_activations != expected[comm->rank()])
        out.push_back(detail::concat("rank ", comm->rank(), " step ", step, ": measured peak ",
                                     stats.peak_live_activations, ", simulator ", expected[comm->rank()]));
      if (stats.live_activations_at_end != 0)
        out.push_back(detail::concat("rank ", comm->rank(), ": ", stats.live_activations_at_end,
                                     " activations still held after the step"));
    }
    return out;
  });
  for (const auto& p : problems) ADD_FAILURE() << p;
}

std::vector<KindCase> all_cases() {
  std::vector<KindCase> cases;
  for (const GeneratorInfo& g : generators())
    for (int r : {2, 4}) cases.push_back({std::string(g.name), r});
  return cases;
}
INSTANTIATE_TEST_SUITE_P(AllKinds, LiveActivations, ::testing::ValuesIn(all_cases()), case_name);

TEST(LiveActivations, ForwardOnlyStepHoldsNothing) {
  const Schedule schedule = make_case_schedule("1f1b", 2);
  const ReferenceSetup setup = make_setup(schedule.num_stages, schedule.num_microbatches, 8, 2, 7);
  auto problems = run_ranks(2, [&](std::shared_ptr<comm::Communicator> comm) {
    RankRun run(setup, schedule, comm, false);
    torch::NoGradGuard no_grad;
    run.step(setup);
    std::vector<std::string> out;
    if (run.executor->last_step_stats().peak_live_activations != 0)
      out.push_back(detail::concat("rank ", comm->rank(), ": peak ",
                                   run.executor->last_step_stats().peak_live_activations));
    return out;
  });
  for (const auto& p : problems) ADD_FAILURE() << p;
}

// One rank, so that no message is allocated on one thread and freed on another (the in-process hub keeps copies
// of sent tensors until they are received): the meter sees every byte of the step.
struct BytesOfOneStep {
  int64_t peak = 0, at_end = 0, losses = 0;  // losses: the storage the returned losses keep alive
};

BytesOfOneStep one_rank_step(const std::string& kind, int microbatches,
                             const std::function<void(runtime::StepArgs&)>& hooks = {}) {
  const Schedule schedule = add_unshard_reshard(make_schedule(kind, {1, microbatches}));
  const ReferenceSetup setup = make_setup(schedule.num_stages, schedule.num_microbatches, 64, 16, 7);
  BytesOfOneStep bytes;
  auto problems = run_ranks(1, [&](std::shared_ptr<comm::Communicator> comm) {
    RankRun run(setup, schedule, comm, false);
    const runtime::StepResult result = run.step(setup, hooks);
    bytes.peak = run.executor->last_step_stats().peak_activation_bytes;
    bytes.at_end = run.executor->last_step_stats().activation_bytes_at_end;
    for (const auto& loss : result.losses) bytes.losses += static_cast<int64_t>(loss.storage().nbytes());
    return std::vector<std::string>{};
  });
  for (const auto& p : problems) ADD_FAILURE() << p;
  return bytes;
}

TEST(ActivationBytes, OnlyTheReturnedLossesAreLeftAfterAStep) {
  for (const char* kind : {"gpipe", "1f1b", "zb-h1"}) {
    const BytesOfOneStep bytes = one_rank_step(kind, 8);
    EXPECT_GT(bytes.peak, bytes.losses) << kind;
    EXPECT_EQ(bytes.at_end, bytes.losses) << kind << ": bytes left besides the returned losses";
  }
}

TEST(ActivationBytes, PeakGrowsWithHeldActivationsOnly) {
  // GPipe holds every micro-batch's activations at its peak: each added micro-batch adds the same bytes. 1F1B on
  // one rank holds one at a time: added micro-batches add only their returned losses.
  const BytesOfOneStep g2 = one_rank_step("gpipe", 2), g4 = one_rank_step("gpipe", 4), g8 = one_rank_step("gpipe", 8);
  EXPECT_EQ(g8.peak - g4.peak, 2 * (g4.peak - g2.peak));
  EXPECT_GT(g4.peak - g2.peak, g4.losses - g2.losses);
  const BytesOfOneStep f4 = one_rank_step("1f1b", 4), f8 = one_rank_step("1f1b", 8);
  EXPECT_EQ(f8.peak - f4.peak, f8.losses - f4.losses);
}

// What an UNSHARD's function allocates under UnmeteredMemory (ZeRO-3's gathered parameters) is not an activation: a
// MiB held from the stage's UNSHARD to its RESHARD leaves the peak as it was, and adds a MiB to it without the guard.
TEST(ActivationBytes, MemoryAHookHoldsUnmeteredIsNotCounted) {
  constexpr int64_t kMiB = 1 << 20;
  const auto holding_a_mib = [](bool unmetered) {
    return [unmetered](runtime::StepArgs& args) {
      auto held = std::make_shared<torch::Tensor>();
      args.wait_unsharded = [held, unmetered](int) {
        std::optional<runtime::UnmeteredMemory> guard;
        if (unmetered) guard.emplace();
        *held = torch::ones({kMiB / 4}, torch::kFloat);
      };
      args.reshard = [held, unmetered](int) {
        std::optional<runtime::UnmeteredMemory> guard;
        if (unmetered) guard.emplace();
        *held = torch::Tensor();
      };
    };
  };
  const BytesOfOneStep plain = one_rank_step("1f1b", 4), hidden = one_rank_step("1f1b", 4, holding_a_mib(true)),
                       counted = one_rank_step("1f1b", 4, holding_a_mib(false));
  EXPECT_EQ(hidden.peak, plain.peak);
  EXPECT_EQ(hidden.at_end, plain.at_end);
  EXPECT_EQ(counted.peak, plain.peak + kMiB);
}

TEST(ActionRecorder, RecordsEveryLoweredActionOfEveryStepInOrder) {
  const Schedule schedule = make_case_schedule("dualpipe", 2);
  const ReferenceSetup setup = make_setup(schedule.num_stages, schedule.num_microbatches, 8, 2, 7);
  auto problems = run_ranks(2, [&](std::shared_ptr<comm::Communicator> comm) {
    RankRun run(setup, schedule, comm, true);
    std::vector<std::string> out;
    auto fail = [&](auto... parts) { out.push_back(detail::concat("rank ", comm->rank(), ": ", parts...)); };
    run.step(setup);
    run.step(setup);
    const size_t n = run.executor->lowered_schedule().actions[comm->rank()].size();
    const auto& records = run.executor->recorded_actions();
    if (records.size() != 2 * n) fail(records.size(), " records for 2 steps of ", n, " actions");
    for (size_t i = 0; i < records.size() && i < 2 * n; ++i) {
      if (records[i].step != static_cast<int>(i / n) || records[i].index != static_cast<int>(i % n))
        fail("record ", i, " is step ", records[i].step, " index ", records[i].index);
      if (records[i].end < records[i].start) fail("record ", i, " ends before it starts");
      if (i > 0 && records[i].start < records[i - 1].end) fail("record ", i, " starts before the previous ended");
    }
    if (run.executor->steps_run() != 2) fail("steps_run ", run.executor->steps_run());
    run.executor->clear_recorded_actions();
    run.executor->set_recording(false);
    run.step(setup);
    if (!run.executor->recorded_actions().empty()) fail("recorded while recording was off");
    return out;
  });
  for (const auto& p : problems) ADD_FAILURE() << p;
}

TEST(ClockSync, ThreadsShareOneClockSoTheOffsetIsWithinTheRoundTrip) {
  std::mutex lock;
  std::vector<runtime::ClockSync> syncs(4);
  auto problems = run_ranks(4, [&](std::shared_ptr<comm::Communicator> comm) {
    runtime::ClockSync s = runtime::synchronize_clocks(*comm, 5);
    std::lock_guard<std::mutex> guard(lock);
    syncs[comm->rank()] = s;
    return std::vector<std::string>{};
  });
  for (const auto& p : problems) ADD_FAILURE() << p;
  EXPECT_EQ(syncs[0].offset_ns, 0);
  for (int r = 1; r < 4; ++r) {
    EXPECT_EQ(syncs[r].epoch_ns, syncs[0].epoch_ns) << "rank " << r;
    EXPECT_GE(syncs[r].round_trip_ns, 0) << "rank " << r;
    // One steady clock for all threads: the true offset is 0, and the estimate is off by at most half the RTT.
    EXPECT_LE(std::abs(syncs[r].offset_ns), syncs[r].round_trip_ns / 2 + 1) << "rank " << r;
  }
}

TEST(Gather, RanksContributeTensorsOfDifferentLengths) {
  std::vector<torch::Tensor> got;
  auto problems = run_ranks(3, [&](std::shared_ptr<comm::Communicator> comm) {
    torch::Tensor mine = torch::arange(comm->rank(), torch::kDouble);  // rank 0 sends an empty tensor
    auto all = runtime::gather_to_root(*comm, mine, comm::application_tag(0));
    if (comm->rank() == 0) got = all;
    return std::vector<std::string>{};
  });
  for (const auto& p : problems) ADD_FAILURE() << p;
  ASSERT_EQ(got.size(), 3u);
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(torch::equal(got[r], torch::arange(r, torch::kDouble))) << r;
}

TEST(GatherTrace, RankZeroGetsEveryRanksActionsOnOneClockAndTheTraceReadsBack) {
  const Schedule schedule = make_case_schedule("zbv", 2);
  const ReferenceSetup setup = make_setup(schedule.num_stages, schedule.num_microbatches, 8, 2, 7);
  Trace merged;
  auto problems = run_ranks(2, [&](std::shared_ptr<comm::Communicator> comm) {
    runtime::ClockSync clock = runtime::synchronize_clocks(*comm);
    RankRun run(setup, schedule, comm, true);
    run.step(setup);
    run.step(setup);
    Trace t = runtime::gather_trace(*run.executor, *comm, clock);
    if (comm->rank() == 0) merged = t;
    return std::vector<std::string>{};
  });
  for (const auto& p : problems) ADD_FAILURE() << p;
  const Schedule lowered = lower_communication(schedule);
  EXPECT_EQ(merged.kind, "zbv");
  EXPECT_EQ(merged.num_stages, schedule.num_stages);
  EXPECT_EQ(merged.events.size(), 2 * lowered.num_actions());
  const Trace back = parse_trace(format_trace(merged), "merged");
  ASSERT_EQ(back.events.size(), merged.events.size());
  EXPECT_EQ(back.steps(), (std::vector<int>{0, 1}));
  for (const TraceEvent& e : back.events) {
    // The trace names a message without its peer: compare the text forms.
    EXPECT_EQ(to_string(e.action), to_string(lowered.actions[e.rank][e.index])) << e.rank << " " << e.index;
    EXPECT_GE(e.start, 0) << "events start after the clock alignment's epoch";
  }
  // The plan's compute order comes back from the header, so the measured step can be drawn and compared.
  const Timeline t = timeline_from_trace(back, 1);
  EXPECT_EQ(t.rows.size(), 2u);
  EXPECT_GT(t.stats.makespan, 0);
}

}  // namespace
}  // namespace dualpipe::testing
