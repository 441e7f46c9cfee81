// --fix: every fixed value holds in every row the search ranks, planned schedules included, or the search says
// which values cannot hold together. The reference is each row's own fields, read one by one.
#include <gtest/gtest.h>

#include <string>

#include "dualpipe/layout/layout.h"
#include "dualpipe/run/train_rules.h"
#include "dualpipe/util/error.h"
#include "layout/search_request.h"
#include "test_helpers.h"

namespace dualpipe::layout {
namespace {

ModelSpec dense_model() {
  return parse_model_spec(R"({"name": "dense", "layers": 8, "hidden": 1024, "heads": 16, "ffn_hidden": 4096,
                              "vocab": 32000, "seq_len": 2048})",
                          "dense.json");
}

ModelSpec moe_model() {
  return parse_model_spec(R"({"name": "moe", "layers": 8, "hidden": 1024, "heads": 16, "ffn_hidden": 4096,
                              "vocab": 32000, "seq_len": 2048, "experts": 8, "top_k": 2,
                              "expert_ffn_hidden": 1024})",
                          "moe.json");
}

LayoutSearch search(const ModelSpec& model, const std::string& fix) {
  LayoutRequest request = test::search_request(model, "a100-80gx16", 64, fix, 50);
  request.include_unfit = true;  // every layout that divides, fitting or not, is held to the fix
  return search_layouts(request);
}

std::string error_of(const ModelSpec& model, const std::string& fix) {
  return test::error_text([&] { search(model, fix); });
}

// The issue's reproducers (schedule=1f1b ranked pp1 "none" rows first; vpp=3 listed vpp 1 rows) and variants.
TEST(LayoutFix, EveryFixedValueHoldsInEveryRow) {
  struct Case {
    std::string fix;
    std::string schedule;  // the fixed schedule, or "" for any
    int vpp, pp, zero, mbs;  // 0: any
  };
  const Case cases[] = {{"schedule=1f1b", "1f1b", 0, 0, 0, 0},
                        {"vpp=2", "", 2, 0, 0, 0},
                        {"vpp=3", "", 3, 0, 0, 0},
                        {"vpp=4,schedule=interleaved-1f1b", "interleaved-1f1b", 4, 0, 0, 0},
                        {"schedule=dualpipev", "dualpipev", 2, 0, 0, 0},
                        {"schedule=none", "none", 1, 1, 0, 0},
                        {"pp=4,zero=3,mbs=2", "", 0, 4, 3, 2},
                        {"vpp=1", "", 1, 0, 0, 0}};
  for (const ModelSpec& model : {dense_model(), moe_model()}) {
    for (const Case& c : cases) {
      const LayoutSearch found = search(model, c.fix);
      ASSERT_FALSE(found.ranked.empty()) << c.fix;
      for (const LayoutResult& row : found.ranked) {
        const Layout& l = row.layout;
        const std::string where = model.name + " --fix " + c.fix + ": row " + l.schedule + " pp" +
                                  std::to_string(l.pp) + "x" + std::to_string(l.vpp);
        if (!c.schedule.empty()) { EXPECT_EQ(l.schedule, c.schedule) << where; }
        if (c.vpp) { EXPECT_EQ(l.vpp, c.vpp) << where; }
        if (c.pp) { EXPECT_EQ(l.pp, c.pp) << where; }
        if (c.zero) { EXPECT_EQ(l.zero, c.zero) << where; }
        if (c.mbs) { EXPECT_EQ(l.micro_batch_size, c.mbs) << where; }
        if ((!c.schedule.empty() && c.schedule != "none") || c.vpp > 1) {
          EXPECT_GT(l.pp, 1) << where;  // a schedule or a vpp above 1 is a pipeline's
        }
      }
    }
  }
  // ep on an MoE model: every row's expert groups are of that size, and among the data-parallel replicas, as the
  // trainer runs them (parallel_dims.h). Layouts with ep dividing tp x cp x dp but not dp are left out.
  const LayoutSearch ep4 = search(moe_model(), "ep=4");
  ASSERT_FALSE(ep4.ranked.empty());
  for (const LayoutResult& row : ep4.ranked) {
    EXPECT_EQ(row.layout.ep, 4);
    EXPECT_EQ(row.layout.dp % 4, 0) << "tp=" << row.layout.tp << " cp=" << row.layout.cp << " dp=" << row.layout.dp;
  }
}

// The planner and the trainer refuse the same sizes with the same rule: one home (parallel::ParallelDims), two
// spellings. The reference is the trainer's own check of its options.
TEST(LayoutFix, ExpertParallelismMeansWhatTheTrainerRuns) {
  Layout l;
  l.tp = 2, l.dp = 2, l.ep = 4, l.pp = 2, l.schedule = "1f1b";
  const std::string planner = test::error_text(
      [&] { evaluate_layout(moe_model(), cluster_spec("a100-80gx8"), 64, l); });
  EXPECT_EQ(planner, "ep=4 must divide dp=2: expert parallelism runs across the data-parallel replicas of a stage");
  run::TrainConfig c;
  c.parallel.pp = 2, c.parallel.dp = 2, c.parallel.tp = 2, c.parallel.ep = 4, c.model.experts = 8;
  EXPECT_EQ(test::error_text([&] { run::check_options(c); }),
            "--ep 4 must divide --dp 2: expert parallelism runs across the data-parallel replicas of a stage");
  l.dp = 4, l.tp = 1;  // what both accept
  EXPECT_EQ(test::error_text([&] { evaluate_layout(moe_model(), cluster_spec("a100-80gx8"), 64, l); }), "(no error)");
  c.parallel.dp = 4, c.parallel.tp = 1;
  EXPECT_EQ(test::error_text([&] { run::check_options(c); }), "(no error)");
}

// Values that cannot hold together are refused before searching, naming them and the rule; values that can, but
// that no layout divides with, name the --fix too.
TEST(LayoutFix, ValuesThatCannotHoldTogetherAreRefusedNamingTheRule) {
  EXPECT_NE(error_of(dense_model(), "ep=2").find("--fix ep=2: ep=2 needs a model with experts; dense is dense"),
            std::string::npos);
  EXPECT_NE(error_of(dense_model(), "ep=3").find("ep=3 needs a model with experts"), std::string::npos);
  EXPECT_NE(error_of(moe_model(), "ep=3").find("ep=3 must divide the model's 8 experts"), std::string::npos);
  // tp x dp = 8 would hold 4 experts' groups, but expert parallelism runs among the data-parallel replicas.
  EXPECT_EQ(error_of(moe_model(), "ep=4,tp=4,dp=2"), "--fix tp=4,dp=2,ep=4: ep=4 must divide dp=2: expert parallelism "
                                                     "runs across the data-parallel replicas of a stage");
  EXPECT_NE(error_of(dense_model(), "vpp=3,schedule=1f1b").find("1f1b runs 1 stage per rank, not vpp=3"),
            std::string::npos);
  EXPECT_NE(error_of(dense_model(), "vpp=4,schedule=zbv").find("zbv runs 2 stages per rank, not vpp=4"),
            std::string::npos);
  EXPECT_NE(error_of(dense_model(), "schedule=none,pp=2").find("so pp must be 1"), std::string::npos);
  EXPECT_NE(error_of(dense_model(), "schedule=dualpipe,pp=1").find("so pp must be above 1"), std::string::npos);
  EXPECT_NE(error_of(dense_model(), "vpp=2,pp=1").find("vpp=2 needs a pipeline"), std::string::npos);
  // Interleaving can run 3 stages per rank, but 4 ranks of 3 are more stages than the model's 8 layers.
  EXPECT_NE(error_of(dense_model(), "pp=4,vpp=3").find("divides with global batch 64 and --fix pp=4,vpp=3"),
            std::string::npos);
}

TEST(LayoutFix, WritesBackWhatItParsed) {
  EXPECT_EQ(LayoutFix::parse("schedule=DualPipe,tp=8,recompute=full").to_string(),
            "tp=8,recompute=full,schedule=dualpipe");
  EXPECT_EQ(LayoutFix::parse("").to_string(), "");
}

}  // namespace
}  // namespace dualpipe::layout
