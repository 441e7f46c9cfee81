// `dualpipe simulate` and `dualpipe plan` as the planner's user runs them (issue 12): tables sorted by step time,
// both bubble rates, fractional peaks, strict costs with exit status 2.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "cli/run_command.h"
#include "dualpipe/schedule/generators.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/sim/trace_costs.h"
#include "dualpipe/trace/trace.h"

namespace {

using dualpipe::test::CommandResult;

using dualpipe::test::dualpipe;
using dualpipe::test::expect_each_refused;

// The json object a command printed, without the notes it wrote to stderr after it.
nlohmann::json json_object_of(const CommandResult& run) {
  return nlohmann::json::parse(run.out.substr(0, run.out.rfind('}') + 1));
}

nlohmann::json json_of(const CommandResult& run) {
  return nlohmann::json::parse(run.out.substr(0, run.out.rfind(']') + 1));
}

TEST(SimulateCli, AllIsSortedByStepTime) {
  // R=8, M=16, FB=2.5 (issue 12): DualPipe's bubble is (S/2-1)(FB+B-3W) = 4.5, larger than ZBV's 3.5, but its
  // overlapped pairs make its step shorter. Sorting by bubble put ZBV first; by step time DualPipe comes first.
  const CommandResult run = dualpipe("simulate --kind all --ranks 8 --microbatches 16 --cost FB=2.5 --format json");
  ASSERT_EQ(run.status, 0) << run.out;
  const nlohmann::json j = json_of(run);
  ASSERT_EQ(j.size(), 10u);
  for (std::size_t i = 1; i < j.size(); ++i) EXPECT_LE(j[i - 1]["makespan"], j[i]["makespan"]) << i;
  std::size_t dualpipe_row = 0, zbv_row = 0;
  for (std::size_t i = 0; i < j.size(); ++i) {
    if (j[i]["kind"] == "dualpipe") dualpipe_row = i;
    if (j[i]["kind"] == "zbv") zbv_row = i;
  }
  EXPECT_DOUBLE_EQ(j[dualpipe_row]["bubble"].get<double>(), 3 * (2.5 + 2 - 3));
  EXPECT_GT(j[dualpipe_row]["bubble"].get<double>(), j[zbv_row]["bubble"].get<double>());
  EXPECT_LT(dualpipe_row, zbv_row);
}

TEST(SimulateCli, BothBubbleRatesAreNamed) {
  // ZB-H2 R=4 M=8 F=I=W=1: span rate 0 (the paper's), step rate 1 - 4*24 / (4*27) = 1/9 (test_bubble_rates.cpp).
  const CommandResult run = dualpipe("simulate --kind zb-h2 --ranks 4 --microbatches 8 --format json");
  ASSERT_EQ(run.status, 0) << run.out;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_DOUBLE_EQ(j["bubble_rate"].get<double>(), 0.0);
  EXPECT_NEAR(j["step_bubble_rate"].get<double>(), 1.0 / 9.0, 1e-12);
  const CommandResult table = dualpipe("simulate --kind all --ranks 4 --microbatches 8");
  for (const char* column : {"step time", "largest idle", "span rate", "step rate", "sorted by step time"})
    EXPECT_NE(table.out.find(column), std::string::npos) << column << "\n" << table.out;
}

TEST(SimulateCli, FractionalPeaksKeepTheirFieldNames) {
  // ZB-H1 R=4 M=8, w_mem=0.4, recompute: the last rank holds three I's shares for W (1.2) while an I recomputes
  // its forward (1): 2.2 (test_activation_memory.cpp derives the same order by hand). Whole peaks stay integers.
  const CommandResult run =
      dualpipe("simulate --kind zb-h1 --ranks 4 --microbatches 8 --cost w_mem=0.4,recompute=1 --format json");
  ASSERT_EQ(run.status, 0) << run.out;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_NEAR(j["per_rank"][3]["peak_activations"].get<double>(), 2.2, 1e-12);
  EXPECT_NEAR(j["peak_activations"].get<double>(), 2.2, 1e-12);
  const CommandResult plain = dualpipe("simulate --kind 1f1b --ranks 4 --microbatches 8 --format json");
  EXPECT_TRUE(nlohmann::json::parse(plain.out)["peak_activations"].is_number_integer());
  const CommandResult table = dualpipe("simulate --kind zb-h1 --ranks 4 --microbatches 8 --cost w_mem=0.4,recompute=1");
  EXPECT_NE(table.out.find("peak activations 2.2 stage activations\n"), std::string::npos) << table.out;
}

TEST(SimulateCli, StrictCostsExitTwoNamingTheRule) {
  expect_each_refused({
      {"simulate --kind 1f1b --ranks 4 --cost scale=1:1:2", "3 values for a schedule with 4 stages"},
      {"simulate --kind all --ranks 4 --cost scale=1:1:2", "needs one per 1/R of the model (4 values)"},
      {"simulate --cost F=1,F=2", "'F' is given twice"},
      {"simulate --cost F=1,,B=2", "item 2"},
      {"simulate --cost F=inf", "'inf' is not a number"},
      {"simulate --cost F=1e999", "overflows"},
      {"simulate --cost w_mem=2", "0 <= w_mem <= 1"},
      {"simulate --cost recompute=2", "recompute must be 0 or 1"},
  });
  // Per 1/R slice in comparisons: 4 values at R=4 also serve the 8-stage schedules.
  EXPECT_EQ(dualpipe("simulate --kind all --ranks 4 --cost scale=1:1:2:1").status, 0);
}

}  // namespace

namespace {

std::string temp_path(const std::string& name) { return testing::TempDir() + "/dualpipe_plan_cli_" + name; }

TEST(PlanCli, OutputValidatesAndRoundTripsThroughSimulate) {
  for (const std::string placement : {"linear", "v", "two"}) {
    for (const std::string format : {"text", "csv"}) {
      SCOPED_TRACE(placement + " " + format);
      const std::string args = "plan -r 4 -m 8 --cost F=1,B=2,W=1,comm=0.1,w_mem=0.5 --memory-limit 4 --placements " +
                               placement;
      const CommandResult json = dualpipe(args + " --format json");
      ASSERT_EQ(json.status, 0) << json.out;
      const nlohmann::json j = json_object_of(json);
      EXPECT_LE(j["peak_activations_per_slice"].get<double>(), 4 + 1e-9);
      const std::string path = temp_path(placement + "." + (format == "csv" ? "csv" : "txt"));
      const CommandResult written = dualpipe(args + " --format " + format + " -o " + path);
      ASSERT_EQ(written.status, 0) << written.out;
      // `schedule --from` validates; `simulate --from` with the plan's own (per stage) costs gives its makespan.
      const CommandResult checked = dualpipe("schedule --from " + path);
      EXPECT_EQ(checked.status, 0) << checked.out;
      const CommandResult sim =
          dualpipe("simulate --from " + path + " --cost " + j["costs_text"].get<std::string>() + " --format json");
      ASSERT_EQ(sim.status, 0) << sim.out;
      const nlohmann::json s = nlohmann::json::parse(sim.out);
      EXPECT_NEAR(s["makespan"].get<double>(), j["makespan"].get<double>(), 1e-9);
      EXPECT_EQ(s["per_rank"].size(), 4u);
    }
  }
}

TEST(PlanCli, APlanFileCarriesItsCostsSoSimulateReproducesTheMakespanOfEveryPlacement) {
  // Without --cost: the file's header brings the costs per stage of the chosen schedule (half the slice's for a V).
  for (const std::string placement : {"linear", "v", "two", "looped"}) {
    SCOPED_TRACE(placement);
    const std::string args = "plan -r 4 -m 8 --cost F=1,B=2,W=1,FB=2.5,comm=0.1 --placements " + placement;
    const CommandResult json = dualpipe(args + " --format json");
    ASSERT_EQ(json.status, 0) << json.out;
    const nlohmann::json j = json_object_of(json);
    const std::string path = temp_path("roundtrip_" + placement + ".txt");
    ASSERT_EQ(dualpipe(args + " --format text -o " + path).status, 0);
    const CommandResult sim = dualpipe("simulate --from " + path + " --format json");
    ASSERT_EQ(sim.status, 0) << sim.out;
    const nlohmann::json s = nlohmann::json::parse(sim.out);
    EXPECT_NEAR(s["makespan"].get<double>(), j["makespan"].get<double>(), 1e-9);
    EXPECT_EQ(s["kind"], j["kind"]) << "the plan's name comes back too";
    // --cost still wins over the file's header: twice every cost, twice the makespan.
    const dualpipe::CostModel header = dualpipe::CostModel::parse(j["costs_text"].get<std::string>());
    // Written in full: a looped plan of 3 stages per rank has costs in thirds, which 6 digits would round.
    const auto twice = [](double cost) {
      std::ostringstream out;
      out << std::setprecision(17) << 2 * cost;
      return out.str();
    };
    const std::string doubled = "F=" + twice(header.forward) + ",B=" + twice(header.backward) + ",W=" +
                                twice(header.weight) + ",FB=" + twice(*header.overlapped) + ",comm=" + twice(header.comm);
    const CommandResult given = dualpipe("simulate --from " + path + " --cost " + doubled + " --format json");
    ASSERT_EQ(given.status, 0) << given.out;
    EXPECT_NEAR(nlohmann::json::parse(given.out)["makespan"].get<double>(), 2 * j["makespan"].get<double>(), 1e-6);
  }
}

TEST(PlanCli, MemoryLimitInBytes) {
  // act_bytes = 1e6 per 1/R slice activation: 3MB is 3 activations, the same plan as --memory-limit 3.
  const CommandResult bytes = dualpipe("plan -r 4 -m 8 --cost act_bytes=1e6 --memory-limit 3MB --format json");
  const CommandResult units = dualpipe("plan -r 4 -m 8 --cost act_bytes=1e6 --memory-limit 3 --format json");
  ASSERT_EQ(bytes.status, 0) << bytes.out;
  const nlohmann::json a = nlohmann::json::parse(bytes.out), b = nlohmann::json::parse(units.out);
  EXPECT_DOUBLE_EQ(a["memory_limit"].get<double>(), 3);
  EXPECT_EQ(a["makespan"], b["makespan"]);
  EXPECT_EQ(a["actions"], b["actions"]);
}

TEST(PlanCli, ByteUnitsMeanTheSameForMemoryLimitAndMaxMemory) {
  // Issue 23: `plan --memory-limit 24GB` read GB as 10^9 bytes and `--max-memory 24GB` as 2^30. Now every option
  // reads KB, MB, GB as powers of 1000 and K, G, KiB, GiB as powers of 1024, in any case.
  struct Size {
    const char* text;
    double bytes;
  };
  for (const Size& size : {Size{"24GB", 24e9}, Size{"24gb", 24e9}, Size{"24GiB", 24.0 * (1 << 30)},
                           Size{"24G", 24.0 * (1 << 30)}, Size{"24000MB", 24e9}}) {
    // --memory-limit in bytes, with one activation of 1e9 bytes.
    const CommandResult limit = dualpipe(std::string("plan -r 4 -m 8 --cost act_bytes=1e9 --memory-limit ") +
                                         size.text + " --format json");
    ASSERT_EQ(limit.status, 0) << size.text << "\n" << limit.out;
    EXPECT_DOUBLE_EQ(json_object_of(limit)["memory_limit"].get<double>(), size.bytes / 1e9) << size.text;
  }
  // --max-memory: the refusal names the limit, 24e9 bytes (22 GiB) for 24GB and 24 GiB for 24GiB, in plan and in
  // the commands that generate schedules.
  const std::string big = "-r 1024 -m 16384 --max-memory ";  // needs about 50 GiB
  EXPECT_REFUSED(dualpipe("plan " + big + "24GB"), "above the limit of 22 GiB");
  EXPECT_REFUSED(dualpipe("plan " + big + "24gb"), "above the limit of 22 GiB");
  EXPECT_REFUSED(dualpipe("plan " + big + "24GiB"), "above the limit of 24 GiB");
  EXPECT_REFUSED(dualpipe("schedule --kind gpipe -r 8 -m 8 --max-memory 1KB"), "above the limit of 1000 bytes");
  EXPECT_REFUSED(dualpipe("schedule --kind gpipe -r 8 -m 8 --max-memory 1KiB"), "above the limit of 1.0 KiB");
  // Both options say so in --help.
  for (const char* command : {"plan", "schedule"}) {
    const CommandResult help = dualpipe(std::string(command) + " --help");
    EXPECT_NE(help.out.find("KB, MB, GB, TB (powers of 1000)"), std::string::npos) << command << "\n" << help.out;
  }
}

TEST(PlanCli, BadInputExitsTwoNamingTheValueAndTheRule) {
  const std::string not_dualpipe = temp_path("not_dualpipe.json");
  {
    FILE* f = std::fopen(not_dualpipe.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("{\"traceEvents\": []}\n", f);
    std::fclose(f);
  }
  expect_each_refused({
      {"plan -r 4 -m 8 --memory-limit 0.5", "below the feasible minimum of 1"},
      {"plan -r 4 -m 8 --cost recompute=1 --placements linear --memory-limit 0.9", "below the feasible minimum of 1"},
      {"plan -r 4 -m 8 --cost F=-1", "F=-1"},
      {"plan -r 4 -m 8 --cost B=nan", "'nan' is not a number"},
      {"plan -r 4 -m 8 --cost W=inf", "'inf' is not a number"},
      {"plan -r 4 -m 8 --cost F=1e999", "overflows"},
      {"plan -r 4 -m 8 --cost scale=1:2:3", "3 values; plan needs one per 1/R slice"},
      {"plan -r 4 -m 8 --memory-limit 3GB", "give the bytes of one stage activation"},
      {"plan -r 4 -m 8 --memory-limit 3parsecs", "unknown unit 'parsecs'"},
      {"plan -r 4 -m 8 --memory-limit -1", "finite number >= 0"},
      {"plan -r 4 -m 8 --placements diagonal", "unknown placement 'diagonal'"},
      {"plan --from-trace " + not_dualpipe, "not a dualpipe trace"},
      {"plan --from-trace /nonexistent/run.json", "/nonexistent/run.json"},
      {"plan -r 4 -m 8 -o /nonexistent/dir/plan.txt --format text", "/nonexistent/dir/plan.txt"},
  });
}

}  // namespace

namespace {

TEST(PlanCli, FromTraceFitsTheCostsOfTheRun) {
  // A DualPipeV run (S = 2R stages) that went exactly as simulated with stage costs F=0.5, B=1.5, W=0.5, 100 us a unit:
  // per 1/R slice that is F=100, B=300, W=100 us (a slice is two V stages), R=4, M=8.
  const dualpipe::Schedule s = dualpipe::make_dualpipev({4, 8, 0});
  const dualpipe::CostModel stage = dualpipe::CostModel::parse("F=0.5,B=1.5,W=0.5");
  const std::string path = temp_path("dualpipev_trace.json");
  dualpipe::write_trace_file(path, dualpipe::trace_from_simulation(s, dualpipe::simulate(s, stage), 100.0, 2));
  const CommandResult run = dualpipe("plan --from-trace " + path + " --placements linear --families-only --format json");
  ASSERT_EQ(run.status, 0) << run.out;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["ranks"], 4);
  EXPECT_EQ(j["microbatches"], 8);
  const dualpipe::CostModel fitted = dualpipe::CostModel::parse(j["costs_text"].get<std::string>());
  EXPECT_NEAR(fitted.forward, 100, 1e-6);
  EXPECT_NEAR(fitted.backward, 300, 1e-6);
  EXPECT_NEAR(fitted.weight, 100, 1e-6);
  EXPECT_NEAR(fitted.scale(0), 1, 1e-9);
}

// simulate --from-trace takes each exchange's time from the run's all-to-all spans (the median of those waited for
// from their start: 3 ms); an a2a given in --cost is then the exchanges' bytes at the link's rate (2 ms each with
// a2a=4 over one layer's two), the rest latency: a2a=6, a2a_latency=1, as if given so.
TEST(SimulateCli, FromTraceTakesTheExchangesLatencyBeyondTheGivenA2a) {
  const dualpipe::Schedule s = dualpipe::make_dualpipev({2, 4, 0});
  dualpipe::Trace trace = dualpipe::trace_from_simulation(s, dualpipe::simulate(s, dualpipe::CostModel{}), 1000.0, 1);
  trace.spans = {{"dispatch", 0, 0, 0, 0, 3000}, {"combine", 1, 0, 0, 0, 2990, 0}, {"dispatch", 1, 0, 0, 0, 3020},
                 {"combine backward", 0, 1, 0, 100, 9000, 8000}};  // waited for late: not an exchange's own time
  const std::string path = temp_path("exchanges.json");
  dualpipe::write_trace_file(path, trace);
  const std::string run = "simulate --kind dualpipev --ranks 2 -m 4 --format json --cost F=4,B=6,W=2,layers=1";
  const CommandResult measured = dualpipe(run + ",a2a=4 --from-trace " + path);
  ASSERT_EQ(measured.status, 0) << measured.out;
  const nlohmann::json j = json_object_of(measured);
  EXPECT_DOUBLE_EQ(j["costs"]["a2a"].get<double>(), 6);
  EXPECT_NEAR(j["costs"]["a2a_latency"].get<double>(), 1, 1e-12);
  const CommandResult given = dualpipe(run + ",a2a=6,a2a_latency=1");
  ASSERT_EQ(given.status, 0) << given.out;
  EXPECT_DOUBLE_EQ(j["makespan"].get<double>(), json_object_of(given)["makespan"].get<double>());
  // The latency changes the step: the same exchanges all bytes, sharing the link, take longer.
  const CommandResult all_bytes = dualpipe(run + " --from-trace " + path);
  ASSERT_EQ(all_bytes.status, 0) << all_bytes.out;
  EXPECT_DOUBLE_EQ(json_object_of(all_bytes)["costs"]["a2a_latency"].get<double>(), 0);
  EXPECT_GT(json_object_of(all_bytes)["makespan"].get<double>(), j["makespan"].get<double>());
  // A latency given with the costs stays.
  const CommandResult kept = dualpipe(run + ",a2a=4,a2a_latency=0.5 --from-trace " + path);
  ASSERT_EQ(kept.status, 0) << kept.out;
  EXPECT_DOUBLE_EQ(json_object_of(kept)["costs"]["a2a_latency"].get<double>(), 0.5);
}

// --rank-speed: a rank at half speed. simulate: 1F1B's step is at least that rank's own work at half speed (8
// micro-batches of F + B = 3, so 48). plan: the cut of 12 equal layers leaves that rank's stage the fewest.
TEST(PlanCli, RankSpeedsSlowTheSimulationAndShapeTheCut) {
  const CommandResult sim = dualpipe("simulate --kind 1f1b --ranks 4 --microbatches 8 --rank-speed 1,0.5,1,1 "
                                     "--format json");
  ASSERT_EQ(sim.status, 0) << sim.out;
  EXPECT_GE(nlohmann::json::parse(sim.out)["makespan"].get<double>(), 48);
  const std::string path = temp_path("twelve.txt");
  {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    for (int i = 0; i < 12; ++i) std::fputs("1 2 1 1000\n", f);
    std::fclose(f);
  }
  const CommandResult plan = dualpipe("plan -r 4 -m 8 --layer-costs " + path +
                                      " --placements linear --families-only --rank-speed 1,0.5,1,1 --format json");
  ASSERT_EQ(plan.status, 0) << plan.out;
  const std::string cut = nlohmann::json::parse(plan.out)["layers_per_stage"].get<std::string>();
  ASSERT_EQ(cut.size(), 7u) << cut;  // four one-digit counts
  EXPECT_LT(cut[2] - '0', 3) << cut;  // rank 1's stage: fewer than the even 3
  const CommandResult bad = dualpipe("simulate --kind 1f1b --ranks 4 --rank-speed 1,1");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.out.find("--rank-speed has 2 values for a schedule of 4 ranks"), std::string::npos) << bad.out;
}

TEST(PlanCli, LayerCostsGiveTheCutForTrain) {
  // 8 equal layers (F+B = 3) and a head (9): 33 in all. No cut into 4 stages has a slowest stage under 9 (the head
  // alone is 9), and any stage holding the head and a layer takes 12; so the head is alone on the last stage and
  // the others hold at most 3 layers each (9): 3,3,2,1 or an order of it.
  const std::string path = temp_path("layers.txt");
  {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("F B W act_bytes\n", f);
    for (int i = 0; i < 8; ++i) std::fputs("1 2 1 1000\n", f);
    std::fputs("3 6 3 4000 # head\n", f);
    std::fclose(f);
  }
  const CommandResult run =
      dualpipe("plan -r 4 -m 8 --layer-costs " + path + " --placements linear --memory-limit 12000B --format json");
  ASSERT_EQ(run.status, 0) << run.out;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  const std::string cut = j["layers_per_stage"].get<std::string>();
  std::vector<int> n;
  for (std::size_t pos = 0; pos <= cut.size();) {
    const std::size_t comma = std::min(cut.find(',', pos), cut.size());
    n.push_back(std::stoi(cut.substr(pos, comma - pos)));
    pos = comma + 1;
  }
  ASSERT_EQ(n.size(), 4u) << cut;
  EXPECT_EQ(n[3], 1) << cut;
  EXPECT_EQ(n[0] + n[1] + n[2], 8) << cut;
  for (int i = 0; i < 3; ++i) EXPECT_LE(n[i], 3) << cut;
  // 12000 bytes with 12000 / 4 = 3000 bytes a slice: 4 slice activations.
  EXPECT_DOUBLE_EQ(j["memory_limit"].get<double>(), 4);
  const CommandResult table = dualpipe("plan -r 4 -m 8 --layer-costs " + path + " --placements linear");
  EXPECT_NE(table.out.find("dualpipe train --layers-per-stage " + cut), std::string::npos) << table.out;
  const CommandResult both = dualpipe("plan -r 4 -m 8 --layer-costs " + path + " --cost F=2");
  EXPECT_EQ(both.status, 2);
  EXPECT_NE(both.out.find("leave F, B, W, scale and act_scale out of --cost"), std::string::npos) << both.out;
}

// Issue 74: plan weighs Megatron's combined 1F1B at each virtual-stage count against DualPipe, DualPipeV and ZBV with
// the all-to-all in the costs (docs/choosing.md, section 4). Each choice is checked against the families simulated
// one by one, at the costs of their own stages (a slice's over the stages per rank).
TEST(PlanCli, WeighsCombined1F1BWithVirtualStagesAgainstDualPipeWithTheAllToAllInTheCosts) {
  const auto makespan = [](const std::string& args) {
    const CommandResult run = dualpipe(args + " -r 8 -m 16 --format json");
    EXPECT_EQ(run.status, 0) << args << "\n" << run.out;
    return json_object_of(run)["makespan"].get<double>();
  };
  const CommandResult free_messages = dualpipe("plan -r 8 -m 16 --cost F=1,B=2,W=1,a2a=0.5,layers=4 --format json");
  ASSERT_EQ(free_messages.status, 0) << free_messages.out;
  const nlohmann::json best = json_object_of(free_messages);
  EXPECT_EQ(best["kind"], "combined-1f1b v=4");
  EXPECT_EQ(best["stages"], 32);
  EXPECT_DOUBLE_EQ(best["makespan"].get<double>(),
                   makespan("simulate -k combined-1f1b -v 4 --cost F=0.25,B=0.5,W=0.25,a2a=0.125,layers=1"));
  EXPECT_LT(best["makespan"].get<double>(), makespan("simulate -k dualpipe --cost F=1,B=2,W=1,a2a=0.5,layers=4"));
  EXPECT_LT(best["makespan"].get<double>(), makespan("simulate -k dualpipev --cost F=0.5,B=1,W=0.5,a2a=0.25,layers=2"));
  EXPECT_LT(best["makespan"].get<double>(),
            makespan("simulate -k combined-1f1b -v 2 --cost F=0.5,B=1,W=0.5,a2a=0.25,layers=2"));

  // Messages that cost a tenth of a forward: four stages per rank send four times as many, and DualPipe wins.
  const CommandResult paid = dualpipe("plan -r 8 -m 16 --cost F=1,B=2,W=1,a2a=0.5,layers=4,comm=0.1 --format json");
  ASSERT_EQ(paid.status, 0) << paid.out;
  EXPECT_EQ(json_object_of(paid)["kind"], "dualpipe");
  EXPECT_DOUBLE_EQ(json_object_of(paid)["makespan"].get<double>(),
                   makespan("simulate -k dualpipe --cost F=1,B=2,W=1,a2a=0.5,layers=4,comm=0.1"));
  EXPECT_GT(makespan("simulate -k combined-1f1b -v 4 --cost F=0.25,B=0.5,W=0.25,a2a=0.125,layers=1,comm=0.1"),
            json_object_of(paid)["makespan"].get<double>());

  // One parameter copy within 9 activations of a slice: combined 1F1B holds more at every v, DualPipeV is the best.
  const CommandResult held = dualpipe("plan -r 8 -m 16 --cost F=1,B=2,W=1,a2a=0.5,layers=4 --memory-limit 9 "
                                      "--placements linear,v,looped --format json");
  ASSERT_EQ(held.status, 0) << held.out;
  EXPECT_EQ(json_object_of(held)["kind"], "dualpipev");
  EXPECT_LE(json_object_of(held)["peak_activations_per_slice"].get<double>(), 9);
}

}  // namespace
