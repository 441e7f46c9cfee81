// NCCL's rules on Gloo: with DUALPIPE_NCCL_RULES=1 every message of every channel travels with tag 0, so a
// receive matches the next message from its source, by order alone, as NCCL matches them, and the pipeline's
// messages go over the two directional channels the trainer makes for NCCL (comm/directional_communicator.h,
// docs/runtime.md, "Communication"). `dualpipe train` must then train bit for bit as in the normal, tagged mode
// over one pipeline group: every schedule
// kind in each layout of the trainer, PP 2, PP 2 x DP 2, and PP 2 x DP 2 x EP 2 with 4 experts (4 processes).
// Two steps cover each sort of message a run sends: the pipeline's in training and in the evaluations before the
// first step and after the last (forward-only), step 1's check against a single-process reference, the replicas'
// comparison at the end, the statistics gathered to rank 0; and around them the collectives (the replicas' and
// the stage copies' gradient reductions, the expert all-to-alls), whose order the tags never set.
#include <gtest/gtest.h>

#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "cli/train_fixture.h"
#include "runtime/support/kind_cases.h"

namespace {

using namespace dualpipe::test;

struct OrderOnlyCase {
  std::string kind;
  std::string layout;  // a name: PP, PP_DP, PP_DP_EP
};

void PrintTo(const OrderOnlyCase& c, std::ostream* out) { *out << c.kind << " " << c.layout; }

std::string layout_options(const std::string& layout) {
  if (layout == "PP") return "--pp 2";
  if (layout == "PP_DP") return "--pp 2 --dp 2";
  return "--pp 2 --dp 2 --ep 2 --experts 4 --top-k 2";
}

// The schedule's results, as the metrics file records them (nlohmann's shortest exact form of each double); the
// measured times, byte counts and bubbles are left out.
const std::vector<std::string> kStepFields = {"loss", "grad_norm", "lr", "moe_aux_loss", "moe_dropped"};

std::string hex(const nlohmann::json& value) {
  if (!value.is_number()) return value.dump();
  char text[64];
  std::snprintf(text, sizeof text, "%a", value.get<double>());
  return text;
}

class OrderOnly : public Train, public ::testing::WithParamInterface<OrderOnlyCase> {
 protected:
  // Runs the job, DUALPIPE_NCCL_RULES=1 or not, and returns its metrics file.
  MetricsFile train(bool nccl_rules) {
    const OrderOnlyCase& c = GetParam();
    const std::string metrics = path(nccl_rules ? "nccl-rules.jsonl" : "tagged.jsonl");
    // --timeout 30: a message matched to the wrong receive that leaves a rank waiting ends the run with an error
    // naming the rank, well within the command's limit.
    const std::string job = kSmall + "--steps 2 --eval-every 0 --sample-tokens 0 -m 4 --timeout 30 --schedule " +
                            c.kind + " " + layout_options(c.layout) + " --metrics " + metrics;
    const std::string env = nccl_rules ? "env -u DUALPIPE_SINGLE_TAG DUALPIPE_NCCL_RULES=1 "
                                       : "env -u DUALPIPE_SINGLE_TAG -u DUALPIPE_NCCL_RULES ";
    const CommandResult run = run_command(env + "timeout -k 5 120 " + DUALPIPE_BIN + " " + job);
    EXPECT_EQ(run.status, 0) << (nccl_rules ? "NCCL's rules: " : "tagged: ") << job << "\n" << run.out;
    EXPECT_EQ(contains(run.out, "the pipeline's messages on two directional channels over Gloo under NCCL's rules"),
              nccl_rules)
        << run.out;
    EXPECT_TRUE(contains(run.out, "step matches the single-process reference")) << run.out;
    if (c.layout != "PP") {
      EXPECT_TRUE(contains(run.out, "data-parallel replicas identical: all ")) << run.out;
    }
    if (c.layout == "PP_DP_EP") {
      EXPECT_TRUE(contains(run.out, "experts sharded over expert-parallel groups of 2 replicas")) << run.out;
    }
    return read_metrics(metrics);
  }
};

TEST_P(OrderOnly, TrainsBitForBitAsWithTags) {
  const OrderOnlyCase& c = GetParam();
  const MetricsFile tagged = train(false);
  if (HasFailure()) return;
  const MetricsFile nccl_rules = train(true);
  if (HasFailure()) return;

  // The layout is the one named: D replicas, and with EP the experts' records.
  ASSERT_EQ(tagged.config["dp"], c.layout == "PP" ? 1 : 2);
  ASSERT_EQ(tagged.config["ranks"], 2);
  ASSERT_EQ(tagged.steps.size(), 2u);
  ASSERT_EQ(tagged.evals.size(), 2u);
  ASSERT_EQ(nccl_rules.steps.size(), tagged.steps.size());
  ASSERT_EQ(nccl_rules.evals.size(), tagged.evals.size());
  if (c.layout == "PP_DP_EP") {
    EXPECT_TRUE(tagged.steps[0].contains("moe_dropped"));
    EXPECT_TRUE(tagged.steps[0].contains("all_to_all_ms"));  // recorded only with EP > 1
  }

  for (std::size_t i = 0; i < tagged.steps.size(); ++i)
    for (const std::string& field : kStepFields) {
      EXPECT_EQ(nccl_rules.steps[i].contains(field), tagged.steps[i].contains(field)) << field;
      if (!tagged.steps[i].contains(field)) continue;
      EXPECT_EQ(nccl_rules.steps[i][field], tagged.steps[i][field])
          << "step " << i + 1 << " " << field << ": " << hex(nccl_rules.steps[i][field]) << " under NCCL's rules, "
          << hex(tagged.steps[i][field]) << " tagged";
    }
  for (std::size_t i = 0; i < tagged.evals.size(); ++i)
    EXPECT_EQ(nccl_rules.evals[i]["val_loss"], tagged.evals[i]["val_loss"])
        << "evaluation at step " << tagged.evals[i]["step"] << ": " << hex(nccl_rules.evals[i]["val_loss"])
        << " under NCCL's rules, " << hex(tagged.evals[i]["val_loss"]) << " tagged";
}

std::vector<OrderOnlyCase> all_cases() {
  std::vector<OrderOnlyCase> cases;
  for (const char* layout : {"PP", "PP_DP", "PP_DP_EP"})
    for (const dualpipe::testing::KindCase& k : dualpipe::testing::all_kind_cases())
      if (k.ranks == 2) cases.push_back({k.kind, layout});  // the nine kinds; every one runs on 2 ranks
  return cases;
}

// "zb_h1_PP_DP": a name GoogleTest accepts.
std::string case_name(const ::testing::TestParamInfo<OrderOnlyCase>& info) {
  std::string name = info.param.kind + "_" + info.param.layout;
  for (char& ch : name)
    if (ch == '-') ch = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(AllKindsAndLayouts, OrderOnly, ::testing::ValuesIn(all_cases()), case_name);

}  // namespace
