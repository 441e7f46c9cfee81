// One vocabulary across the commands: each example a user reported, run through the CLI with the corrected
// behaviour checked. Memory units and parameter copies, one flag grammar (--version, kinds in any case with a
// suggestion for a slip, --kind, -o, --format, --step, -n, switch defaults), units and JSON values, honest fits.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/run_command.h"
#include "dualpipe/schedule/generators.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/sim/trace_costs.h"
#include "dualpipe/trace/trace.h"

namespace {

using dualpipe::test::CommandResult;

using dualpipe::test::dualpipe;

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "dualpipe_vocabulary_" + name; }

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

using dualpipe::test::contains;

// A 1F1B trace of R=2, M=4 that went as simulated (F=1, B=2, W=1 at 1000 us a unit), as step `step`.
std::string write_simulated_trace(const std::string& name, const std::string& kind, int step) {
  const dualpipe::Schedule s = dualpipe::make_schedule(kind, {2, 4, 0});
  const std::string path = temp_path(name);
  dualpipe::write_trace_file(path,
                             dualpipe::trace_from_simulation(s, dualpipe::simulate(s, dualpipe::CostModel{}), 1000, step));
  return path;
}

TEST(Vocabulary, VersionPrintsTheProjectVersion) {
  const CommandResult run = dualpipe("--version");
  EXPECT_EQ(run.status, 0) << run.out;
  EXPECT_TRUE(std::regex_match(run.out, std::regex("dualpipe [0-9]+\\.[0-9]+\\.[0-9]+\n"))) << run.out;
}

TEST(Vocabulary, KindNamesAreCaseInsensitive) {
  const CommandResult lower = dualpipe("schedule --kind dualpipe -r 4 -m 8");
  ASSERT_EQ(lower.status, 0) << lower.out;
  for (const char* name : {"DualPipe", "DUALPIPE"}) {
    const CommandResult other = dualpipe(std::string("schedule --kind ") + name + " -r 4 -m 8");
    EXPECT_EQ(other.status, 0) << name << "\n" << other.out;
    EXPECT_EQ(other.out, lower.out) << name;
  }
  EXPECT_EQ(dualpipe("simulate --kind ZB-H1 -r 4 -m 8").status, 0);
}

TEST(Vocabulary, AMisspelledKindGetsTheClosestName) {
  EXPECT_REFUSED(dualpipe("schedule --kind dualpip -r 4 -m 8"), "did you mean 'dualpipe'?");
  EXPECT_REFUSED(dualpipe("schedule --kind 1fib -r 4 -m 8"), "did you mean '1f1b'?");
  EXPECT_REFUSED(dualpipe("simulate --kind zbb -r 4 -m 8"), "did you mean 'zbv'?");
  // Nothing close: the known kinds only.
  const CommandResult far = dualpipe("schedule --kind nosuch -r 4 -m 8");
  EXPECT_REFUSED(far, "unknown schedule kind 'nosuch' (known kinds: gpipe, 1f1b");
  EXPECT_EQ(far.out.find("did you mean"), std::string::npos) << far.out;
}

TEST(Vocabulary, TrainTakesKindLikeTheOtherCommands) {
  // The kind reaches the schedule generator through --kind as through --schedule (refused before any rank starts).
  EXPECT_REFUSED(dualpipe("train --kind dualpip --steps 1"), "did you mean 'dualpipe'?");
  EXPECT_REFUSED(dualpipe("train --schedule dualpip --steps 1"), "did you mean 'dualpipe'?");
  const CommandResult help = dualpipe("train --help");
  EXPECT_NE(help.out.find("--kind,--schedule"), std::string::npos) << help.out;
}

// "simulate shows zbv's peak as 16, plan shows the same schedule as 8": two units, now each named, with the
// model fraction beside the stage count, so the two agree.
TEST(Vocabulary, ActivationsSayTheirUnitAndAgreeAcrossCommands) {
  const CommandResult all = dualpipe("simulate --kind all -r 8 -m 32 --cost F=1,B=2,W=1 --format json");
  ASSERT_EQ(all.status, 0) << all.out;
  const auto kinds = nlohmann::json::parse(all.out.substr(0, all.out.rfind(']') + 1));
  nlohmann::json zbv;
  for (const auto& k : kinds)
    if (k["kind"] == "zbv") zbv = k;
  ASSERT_FALSE(zbv.is_null()) << all.out;
  EXPECT_EQ(zbv["peak_activations"], 16);  // stage activations: a ZBV stage is half a 1/R slice
  EXPECT_DOUBLE_EQ(zbv["per_rank"][0]["peak_activation_fraction"].get<double>(), 1.0);  // 16 of S = 16 stages
  const CommandResult table = dualpipe("simulate --kind zbv -r 8 -m 32");
  EXPECT_TRUE(contains(table.out, "peak activations 16 stage activations")) << table.out;
  // plan's pick among the V families, in its own unit: the same peak as simulate's, times R/S.
  const CommandResult families =
      dualpipe("plan -r 8 -m 32 --cost F=1,B=2,W=1 --families-only --placements v --format json");
  ASSERT_EQ(families.status, 0) << families.out;
  const auto pick = nlohmann::json::parse(families.out.substr(0, families.out.rfind('}') + 1));
  bool found = false;
  for (const auto& k : kinds) {
    if (k["kind"] != pick["kind"]) continue;
    found = true;
    EXPECT_DOUBLE_EQ(pick["peak_activations_per_slice"].get<double>(),
                     k["peak_activations"].get<double>() * 8 / k["stages"].get<double>())
        << pick["kind"];
  }
  EXPECT_TRUE(found) << "plan picked " << pick["kind"];
  // plan: "memory limit: 4" then "peak activations 8" read as a broken limit; now the slice unit is named.
  const CommandResult plan = dualpipe("plan -r 4 -m 8 --memory-limit 4 --placements v");
  ASSERT_EQ(plan.status, 0) << plan.out;
  EXPECT_TRUE(contains(plan.out, "memory limit: 4 (4 activations of a 1/R slice)")) << plan.out;
  EXPECT_TRUE(std::regex_search(plan.out, std::regex("peak activations of the plan: [1-4](\\.[0-9]+)? activations of "
                                                     "a 1/R slice \\(the unit of --memory-limit\\)")))
      << plan.out;
}

// "stages held" was 2 for one copy in two chunks (zbv, dualpipev, interleaved) and for two copies (dualpipe,
// chimera) alike, and plan picked a two-copy placement without a word.
TEST(Vocabulary, ParameterCopiesAreToldApartFromChunksAndPlanWarnsOfTwo) {
  const CommandResult all = dualpipe("simulate --kind all -r 4 -m 8 --format json");
  ASSERT_EQ(all.status, 0) << all.out;
  for (const auto& k : nlohmann::json::parse(all.out.substr(0, all.out.rfind(']') + 1))) {
    const std::string kind = k["kind"];
    const bool two_copies = kind == "dualpipe" || kind == "chimera";
    const bool chunked = two_copies || kind == "zbv" || kind == "dualpipev" || kind == "interleaved-1f1b" ||
                         kind == "combined-1f1b";
    EXPECT_EQ(k["per_rank"][0]["parameter_copies"], two_copies ? 2 : 1) << kind;
    EXPECT_EQ(k["per_rank"][0]["stages_held"], chunked ? 2 : 1) << kind;
  }
  const CommandResult two = dualpipe("plan -r 4 -m 8 --placements two");
  ASSERT_EQ(two.status, 0) << two.out;
  EXPECT_TRUE(contains(two.out, "holds two copies of the parameters")) << two.out;
  EXPECT_TRUE(contains(two.out, "--placements linear,v,looped keeps to one copy")) << two.out;
  const CommandResult one = dualpipe("plan -r 4 -m 8 --placements linear,v,looped");
  ASSERT_EQ(one.status, 0) << one.out;
  EXPECT_FALSE(contains(one.out, "two copies")) << one.out;
}

// "-n is --steps in train and --nproc in launch": it is launch's alone now.
TEST(Vocabulary, DashNCountsProcessesOnlyInLaunch) {
  const CommandResult train = dualpipe("train -n 5");
  EXPECT_EQ(train.status, 2) << train.out;
  EXPECT_TRUE(contains(train.out, "-n")) << train.out;
  EXPECT_TRUE(contains(dualpipe("launch --help").out, "-n,--nproc-per-node")) << "launch keeps -n";
}

// "-o is required in draw, defaults in plot, and is missing in schedule and simulate; plan -o x.txt cannot write
// the table": every printing command takes -o for any --format, written whole.
TEST(Vocabulary, EveryPrintingCommandWritesItsOutputToDashO) {
  for (const std::string& command :
       {std::string("schedule --kind 1f1b -r 2 -m 4"), std::string("schedule --kind 1f1b -r 2 -m 4 --format json"),
        std::string("simulate --kind 1f1b -r 2 -m 4"), std::string("simulate --kind all -r 2 -m 4 --format json"),
        std::string("plan -r 2 -m 4 --placements linear"),
        std::string("plan -r 2 -m 4 --placements linear --format json")}) {
    SCOPED_TRACE(command);
    const CommandResult printed = dualpipe(command);
    ASSERT_EQ(printed.status, 0) << printed.out;
    const std::string path = temp_path("out.txt");
    std::filesystem::remove(path);
    const CommandResult written = dualpipe(command + " -o " + path);
    ASSERT_EQ(written.status, 0) << written.out;
    EXPECT_EQ(slurp(path), printed.out) << "the file holds what the command prints";
  }
  // Never onto an input.
  const std::string plan = temp_path("plan_in.txt");
  ASSERT_EQ(dualpipe("plan -r 2 -m 4 --format text -o " + plan).status, 0);
  const std::string before = slurp(plan);
  EXPECT_REFUSED(dualpipe("simulate --from " + plan + " -o " + plan), "-o");
  EXPECT_EQ(slurp(plan), before);
}

// "--step -1 is refused by draw and silently taken by compare; train numbers steps from 1 while compare says
// steps recorded: 0, 1": one rule for --step, and the steps are named as the trace numbers them.
TEST(Vocabulary, StepFollowsOneRuleInCompareAndDraw) {
  const std::string trace = write_simulated_trace("step3.json", "1f1b", 3);
  for (const std::string& command :
       {"compare --trace " + trace, "draw --trace " + trace + " -o " + temp_path("step.svg")}) {
    SCOPED_TRACE(command);
    EXPECT_REFUSED(dualpipe(command + " --step -1"), "--step");
    EXPECT_REFUSED(dualpipe(command + " --step 1"), "has no step 1 (steps recorded: 3)");
    EXPECT_EQ(dualpipe(command + " --step 3").status, 0);
  }
}

// "Help shows --dp-overlap,--no-dp-overlap{false} although overlap is on by default."
TEST(Vocabulary, HelpShowsTheRealDefaultsOfSwitches) {
  const CommandResult help = dualpipe("train --help");
  EXPECT_FALSE(contains(help.out, "{false}")) << help.out;
  EXPECT_FALSE(contains(help.out, "{true}")) << help.out;
  EXPECT_TRUE(contains(help.out, "--dp-overlap,--no-dp-overlap (default: on)")) << help.out;
  EXPECT_TRUE(contains(help.out, "--fb-overlap,--no-fb-overlap (default: on)")) << help.out;
}

// "plan --from-trace prints raw microseconds with no unit; JSON gives costs as a string and
// peak_activation_bytes as 0.0 when no byte size is known."
TEST(Vocabulary, TimesSayTheirUnitAndJsonHoldsNumbersAndNulls) {
  const std::string trace = write_simulated_trace("units.json", "1f1b", 1);
  const CommandResult plan = dualpipe("plan --from-trace " + trace + " --families-only");
  ASSERT_EQ(plan.status, 0) << plan.out;
  EXPECT_TRUE(contains(plan.out, "times in microseconds, costs fitted from")) << plan.out;
  const CommandResult json = dualpipe("simulate --kind 1f1b -r 2 -m 4 --format json");
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_TRUE(j["costs"].is_object());
  EXPECT_EQ(j["costs"]["F"], 1.0);
  EXPECT_TRUE(j["costs"]["act_bytes"].is_null());
  EXPECT_TRUE(j["per_rank"][0]["peak_activation_bytes"].is_null());
  EXPECT_EQ(j["costs"]["layers"], 1);
  const auto moe = nlohmann::json::parse(dualpipe("simulate --kind dualpipev -r 2 -m 4 --cost a2a=0.5,layers=3 "
                                                  "--format json").out);
  EXPECT_EQ(moe["costs"]["layers"], 3);
  EXPECT_EQ(moe["costs"]["a2a"], 0.5);
  const CommandResult sized = dualpipe("simulate --kind 1f1b -r 2 -m 4 --cost act_bytes=3145728");
  EXPECT_TRUE(contains(sized.out, "3.0 MiB") || contains(sized.out, "6.0 MiB")) << sized.out;
}

// "After a 2-step run, compare fitted B = W, so I = 0, with the bubble-rate row printing -0.0%": the fit keeps
// each stage's own I and W, reports its residual, and a zero rate prints without a sign.
TEST(Vocabulary, CompareReportsItsFitAndNoNegativeZero) {
  const std::string trace = write_simulated_trace("fit.json", "zb-h1", 1);
  const CommandResult json = dualpipe("compare --trace " + trace + " --format json");
  ASSERT_EQ(json.status, 0) << json.out;
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["costs_source"], "fitted");
  EXPECT_NEAR(j["fit"]["residual"].get<double>(), 0, 1e-9);
  EXPECT_TRUE(j["fit"]["warnings"].empty());
  EXPECT_NEAR(j["costs"]["B"].get<double>() - j["costs"]["W"].get<double>(), 1000, 1e-6);  // I = B - W, kept
  const CommandResult table = dualpipe("compare --trace " + trace);
  EXPECT_TRUE(contains(table.out, "fit residual: 0.0%")) << table.out;
  EXPECT_FALSE(contains(table.out, "-0.0%")) << table.out;
}

// The acceptance case: `compare` on a trace with known, uneven I and W durations (stage 0 like an embedding
// stage: a cheap forward, a large weight gradient) that vary +-4% from one micro-batch to the next fits each
// stage's I and W within 5%.
TEST(Vocabulary, CompareFitsKnownInputAndWeightDurationsWithinFivePercent) {
  const dualpipe::CostModel truth = dualpipe::CostModel::parse("F=0.3:1:1:1,B=2.5:2:2:2,W=1.8:1:1:1");
  const dualpipe::Schedule s = dualpipe::make_schedule("zb-h1", {4, 8, 0});
  dualpipe::Trace trace = dualpipe::trace_from_simulation(s, dualpipe::simulate(s, truth), 1000, 1);
  int k = 0;
  // Starts spread by 10% so that a lengthened action never reaches the next one (a trace reader refuses overlaps).
  for (dualpipe::TraceEvent& e : trace.events) {
    e.start *= 1.1;
    if (e.action.is_compute()) e.duration *= 1 + 0.04 * std::sin(1.7 * k++);
  }
  const std::string path = temp_path("uneven.json");
  dualpipe::write_trace_file(path, trace);
  const CommandResult run = dualpipe("compare --trace " + path + " --format json");
  ASSERT_EQ(run.status, 0) << run.out;
  const auto costs = nlohmann::json::parse(run.out)["costs"];
  for (int stage = 0; stage < 4; ++stage) {
    const double input = 1000 * (truth.backward_of(stage) - truth.weight_of(stage));
    const double weight = 1000 * truth.weight_of(stage);
    EXPECT_NEAR(costs["B"][stage].get<double>() - costs["W"][stage].get<double>(), input, 0.05 * input) << stage;
    EXPECT_NEAR(costs["W"][stage].get<double>(), weight, 0.05 * weight) << stage;
  }
  const CommandResult table = dualpipe("compare --trace " + path);
  EXPECT_TRUE(std::regex_search(table.out, std::regex("fit residual: [1-3]\\.[0-9]%"))) << table.out;
}

}  // namespace
