// The plan is what runs: each REDUCE_GRAD action of a data-parallel training run does the reduction it stands for,
// where the schedule puts it, on every step (step 1 included) and in every ZeRO stage (an all-reduce below ZeRO-2,
// a reduce onto the owners from ZeRO-2 on, an all-reduce over the joined holders of DualPipe's stage copies).
//
// Read from the trace of replica 0, whose REDUCE_GRAD events carry the bytes of gradients each started reducing:
// on every rank and every step, each stage the rank holds has one REDUCE_GRAD, after the step's last action that
// adds to the stage's gradients (its last B, I or W, or an overlapped pair's backward half) has ended, with no
// compute action between the two (at the step's end with --no-dp-overlap); and together they start the reduction
// of every gradient the rank holds. The reference for the bytes is another measurement: the parameter bytes each
// rank holds after a ZeRO-0 run of the same layout (the metrics' parameter_bytes, summed from the stages' tensors).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "cli/train_fixture.h"
#include "dualpipe/schedule/action.h"

namespace {

using namespace dualpipe::test;

const std::string kReducedJob = kSmall + "--eval-every 0 --sample-tokens 0 --steps 3 --pp 2 --dp 2 -m 4 ";

struct Event {
  dualpipe::Action action;
  int index = 0;
  double start = 0, end = 0, bytes = -1, completed = -1;
};

// The trace's action events by rank and step, in the order each rank ran them.
std::map<int, std::map<int, std::vector<Event>>> events_by_rank_and_step(const std::string& trace_path) {
  std::map<int, std::map<int, std::vector<Event>>> out;
  const nlohmann::json trace = nlohmann::json::parse(read_file(trace_path));
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X" || !e["args"].contains("index")) continue;
    Event ev{dualpipe::parse_action(e["name"].get<std::string>()), e["args"]["index"].get<int>(), e["ts"].get<double>(),
             e["ts"].get<double>() + e["dur"].get<double>(),
             e["args"].value("bytes", -1.0), e["args"].value("completed", -1.0)};
    out[e["args"]["rank"].get<int>()][e["args"]["step"].get<int>()].push_back(ev);
  }
  for (auto& [rank, steps] : out)
    for (auto& [step, events] : steps)
      std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.index < b.index; });
  return out;
}

// The stage an action adds gradients to (-1: none).
int gradient_stage(const dualpipe::Action& a) {
  using dualpipe::ActionType;
  if (a.type == ActionType::Overlapped) return a.bwd_stage;
  if (a.type == ActionType::Backward || a.type == ActionType::BackwardInput || a.type == ActionType::BackwardWeight)
    return a.stage;
  return -1;
}

// Trains `layout` at ZeRO stage `zero` with a trace and checks its REDUCE_GRAD events as the top of this file says;
// `held_bytes`: each rank's parameter bytes in a ZeRO-0 run of the layout.
void expect_reductions_at_their_actions(const std::string& layout, int zero, bool overlap,
                                        const std::vector<double>& held_bytes, const std::string& dir) {
  const std::string label = layout + " --zero " + std::to_string(zero) + (overlap ? "" : " --no-dp-overlap");
  const std::string trace = dir + "/reduce.json";
  const CommandResult run = dualpipe_cmd(kReducedJob + layout + " --zero " + std::to_string(zero) +
                                             (overlap ? "" : " --no-dp-overlap") + " --trace " + trace, 180);
  ASSERT_EQ(run.status, 0) << label << "\n" << run.out;
  EXPECT_TRUE(contains(run.out, "step matches the single-process reference")) << label << "\n" << run.out;
  const auto events = events_by_rank_and_step(trace);
  ASSERT_EQ(events.size(), held_bytes.size()) << label;
  for (const auto& [rank, steps] : events) {
    ASSERT_EQ(steps.size(), 3u) << label << " rank " << rank;
    for (const auto& [step, list] : steps) {
      const std::string where = label + " rank " + std::to_string(rank) + " step " + std::to_string(step);
      std::map<int, std::size_t> last_gradient;  // stage -> position in `list`
      for (std::size_t i = 0; i < list.size(); ++i)
        if (gradient_stage(list[i].action) >= 0) last_gradient[gradient_stage(list[i].action)] = i;
      double started = 0;
      int reductions = 0;
      for (std::size_t i = 0; i < list.size(); ++i) {
        const Event& e = list[i];
        if (e.action.type != dualpipe::ActionType::ReduceGrad) continue;
        ++reductions;
        ASSERT_TRUE(last_gradient.count(e.action.stage)) << where << ": stage " << e.action.stage;
        const std::size_t last = last_gradient[e.action.stage];
        EXPECT_GT(i, last) << where << ": " << dualpipe::to_string(e.action);
        EXPECT_GE(e.start, list[last].end) << where << ": " << dualpipe::to_string(e.action);
        bool compute_between = false, compute_after = false;
        for (std::size_t j = last + 1; j < list.size(); ++j)
          (j < i ? compute_between : compute_after) |= list[j].action.is_compute();
        EXPECT_EQ(compute_between, false) << where << ": a compute action before " << dualpipe::to_string(e.action);
        if (!overlap) {
          EXPECT_EQ(compute_after, false) << where << ": " << dualpipe::to_string(e.action);
        }
        EXPECT_GT(e.bytes, 0) << where << ": " << dualpipe::to_string(e.action) << " reduced nothing";
        EXPECT_GE(e.completed, 0) << where << ": " << dualpipe::to_string(e.action) << " never completed";
        started += e.bytes;
      }
      EXPECT_EQ(reductions, static_cast<int>(last_gradient.size())) << where;
      EXPECT_EQ(started, held_bytes[static_cast<std::size_t>(rank)]) << where;
    }
  }
}

// Each rank's parameter bytes after a ZeRO-0 run of `layout`.
std::vector<double> parameter_bytes(const std::string& layout, const std::string& dir) {
  const CommandResult run = dualpipe_cmd(kReducedJob + layout + " --metrics " + dir + "/whole.jsonl", 180);
  EXPECT_EQ(run.status, 0) << layout << "\n" << run.out;
  const MetricsFile m = read_metrics(dir + "/whole.jsonl");
  if (m.steps.empty()) return {};
  return m.steps.back()["parameter_bytes"].get<std::vector<double>>();
}

TEST_F(Train, EveryReduceGradActionReducesWhereThePlanPutsItOnEveryStep) {
  const std::vector<double> one_stage_each = parameter_bytes("--schedule 1f1b", dir_);
  ASSERT_EQ(one_stage_each.size(), 2u);
  for (int zero : {0, 1, 2, 3}) expect_reductions_at_their_actions("--schedule 1f1b", zero, true, one_stage_each, dir_);
  expect_reductions_at_their_actions("--schedule 1f1b", 2, false, one_stage_each, dir_);
  // Two stages per rank: DualPipeV's V (stage 3 reduced while stage 0 still computes), and DualPipe's copies of
  // both stages on both ranks (joined to the replicas' reduction).
  for (const char* schedule : {"dualpipev", "dualpipe"}) {
    const std::string layout = std::string("--schedule ") + schedule;
    const std::vector<double> held = parameter_bytes(layout, dir_);
    ASSERT_EQ(held.size(), 2u) << layout;
    for (int zero : {2, 3}) expect_reductions_at_their_actions(layout, zero, true, held, dir_);
  }
}

// `dualpipe compare` of a PP 2 x DP 2 ZeRO-2 run sets the data-parallel reductions beside the plan's: every planned
// REDUCE_GRAD measured with its completion, the link's reduce cost fitted from them, and the step until the last
// reduction on both sides. (How close the two steps come is a measurement: docs/benchmarks.md.)
TEST_F(Train, CompareSetsTheMeasuredReductionsBesideThePlans) {
  const std::string trace = path("zero2.json");
  const CommandResult run =
      dualpipe_cmd(kReducedJob + "--schedule 1f1b --zero 2 --steps 3 --trace " + trace, 180);
  ASSERT_EQ(run.status, 0) << run.out;
  const CommandResult compare = dualpipe_cmd("compare --trace " + trace + " --format json");
  ASSERT_EQ(compare.status, 0) << compare.out;
  const auto j = nlohmann::json::parse(compare.out);
  const auto& dp = j["data_parallel"];
  ASSERT_TRUE(dp.is_object()) << compare.out;
  EXPECT_EQ(dp["plan_reductions"], 2);  // one stage per rank
  EXPECT_EQ(dp["measured_reductions"], 2);
  EXPECT_GT(j["costs"]["reduce"].get<double>(), 0) << compare.out;
  EXPECT_GT(dp["measured_step"].get<double>(), j["measured"]["makespan"].get<double>() * 0.999) << compare.out;
  EXPECT_GT(dp["plan_step"].get<double>(), 0);
  const CommandResult table = dualpipe_cmd("compare --trace " + trace);
  EXPECT_TRUE(contains(table.out, "data-parallel reductions (REDUCE_GRAD): 2 measured")) << table.out;

  // A trace whose step lacks one of the plan's REDUCE_GRAD events is refused, as one lacking a compute action is.
  auto whole = nlohmann::json::parse(read_file(trace));
  auto& events = whole["traceEvents"];
  for (auto it = events.begin(); it != events.end(); ++it)
    if ((*it)["name"] == "1REDUCE_GRAD" && (*it)["args"]["step"] == 3) {
      events.erase(it);
      break;
    }
  std::ofstream(path("cut.json")) << whole.dump();
  const CommandResult cut = dualpipe_cmd("compare --trace " + path("cut.json"));
  EXPECT_NE(cut.status, 0);
  EXPECT_TRUE(contains(cut.out, "step 3 has no event for '1REDUCE_GRAD' on rank 1")) << cut.out;
}

}  // namespace
