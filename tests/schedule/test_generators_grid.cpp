// Every generator over a grid of (R, M): it either rejects the parameters with InvalidArgument naming them,
// or produces a schedule that validates and has the shape the spec gives for its family (spec sections 1,
// 2 and 6): S*M forwards and S*M backwards, every action on the rank the placement names, the stage count
// and the parameter copies per rank.
#include <gtest/gtest.h>

#include <set>

#include <string>
#include <vector>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/validate.h"
#include "dualpipe/sim/simulate.h"
#include "test_helpers.h"

namespace dualpipe {
namespace {

using test::contains;

// Expected shape per family, from the spec.
struct Family {
  int stages;             // S as a function of R (and v for interleaved)
  int parameter_copies;   // stage modules per rank
  int replicas;           // placements with two replicas of every stage
};

Family family_of(std::string_view kind, int R, int stages_per_rank) {
  if (kind == "dualpipe" || kind == "chimera") return {R, 2, 2};           // two directions, S = R
  if (kind == "dualpipev" || kind == "zbv") return {2 * R, 2, 1};          // V: stages r and 2R-1-r
  if (kind == "interleaved-1f1b") return {stages_per_rank * R, stages_per_rank, 1};  // looped
  if (kind == "combined-1f1b") {  // looped; one rank runs Megatron's no-pipelining path, one stage
    const int v = R == 1 ? 1 : stages_per_rank;
    return {v * R, v, 1};
  }
  return {R, 1, 1};                                                         // gpipe, 1f1b, zb-h1, zb-h2
}

class GeneratorGrid : public ::testing::TestWithParam<std::string> {};

TEST_P(GeneratorGrid, RejectsOrProducesAValidScheduleOfTheRightShape) {
  const std::string kind = GetParam();

  int accepted = 0, rejected = 0;
  for (int R : {1, 2, 3, 4, 6, 8}) {
    for (int M = 1; M <= 4 * R; ++M) {
      SCOPED_TRACE(kind + " R=" + std::to_string(R) + " M=" + std::to_string(M));
      Schedule s;
      try {
        s = make_schedule(kind, ScheduleOptions{R, M});
      } catch (const InvalidArgument& e) {
        // The rule is named with the offending value (DESIGN.md, "Errors").
        const std::string message = e.what();
        EXPECT_TRUE(contains(message, std::to_string(R)) || contains(message, std::to_string(M))) << message;
        ++rejected;
        continue;
      }
      ++accepted;

      // Family shape. Interleaved 1F1B defaults to 2 stages per rank (its registry summary says so).
      const Family f = family_of(kind, R, /*stages_per_rank=*/2);
      EXPECT_EQ(s.kind, kind);
      EXPECT_EQ(s.num_ranks, R);
      EXPECT_EQ(s.num_microbatches, M);
      EXPECT_EQ(s.num_stages, f.stages);
      EXPECT_EQ(s.placement.num_ranks(), R);
      EXPECT_EQ(s.placement.num_stages(), s.num_stages);
      EXPECT_EQ(s.placement.num_replicas(), f.replicas);
      ASSERT_EQ(static_cast<int>(s.actions.size()), R);

      // The validator finds nothing.
      const std::vector<std::string> problems = find_problems(s);
      EXPECT_TRUE(problems.empty()) << test::join_lines(problems);

      // Our own count: S*M forwards and S*M backwards (B, or I; an overlapped pair is one of each),
      // one W per I, and each on the rank the placement names.
      const int S = s.num_stages;
      int forwards = 0, backwards = 0, inputs = 0, weights = 0;
      std::vector<int> seen_forward(S * M, 0), seen_backward(S * M, 0);
      std::vector<std::set<int>> ranks_running_stage(S);
      for (int r = 0; r < R; ++r) {
        for (const Action& a : s.actions[r]) {
          ASSERT_TRUE(a.is_compute()) << "generators emit compute actions only";
          auto on_rank = [&](int stage, int m) {
            ASSERT_TRUE(stage >= 0 && stage < S && m >= 0 && m < M) << to_string(a);
            EXPECT_EQ(s.placement.rank(stage, m), r) << to_string(a) << " on rank " << r;
            ranks_running_stage[stage].insert(r);
          };
          switch (a.type) {
            case ActionType::Forward:
              on_rank(a.stage, a.microbatch);
              ++forwards, ++seen_forward[a.stage * M + a.microbatch];
              break;
            case ActionType::Backward:
              on_rank(a.stage, a.microbatch);
              ++backwards, ++seen_backward[a.stage * M + a.microbatch];
              break;
            case ActionType::BackwardInput:
              on_rank(a.stage, a.microbatch);
              ++backwards, ++inputs, ++seen_backward[a.stage * M + a.microbatch];
              break;
            case ActionType::BackwardWeight:
              on_rank(a.stage, a.microbatch);
              ++weights;
              break;
            case ActionType::Overlapped:
              on_rank(a.stage, a.microbatch);
              on_rank(a.bwd_stage, a.bwd_microbatch);
              ++forwards, ++seen_forward[a.stage * M + a.microbatch];
              ++backwards, ++seen_backward[a.bwd_stage * M + a.bwd_microbatch];
              break;
            default:
              break;
          }
        }
      }
      EXPECT_EQ(forwards, S * M);
      EXPECT_EQ(backwards, S * M);
      EXPECT_EQ(weights, inputs);
      for (int k = 0; k < S * M; ++k) {
        EXPECT_EQ(seen_forward[k], 1) << "stage " << k / M << " micro-batch " << k % M;
        EXPECT_EQ(seen_backward[k], 1) << "stage " << k / M << " micro-batch " << k % M;
      }

      // The ranks holding each stage's copies are those that run it.
      for (int st = 0; st < S; ++st) {
        const std::vector<int> holding = s.placement.ranks_holding(st);
        EXPECT_EQ(std::set<int>(holding.begin(), holding.end()), ranks_running_stage[st]) << "stage " << st;
        EXPECT_EQ(holding.size(), ranks_running_stage[st].size()) << "stage " << st << ": a rank named twice";
      }

      // Parameter copies, from the placement and as the simulator reports them.
      const Simulation sim = simulate(s, CostModel{});
      for (int r = 0; r < R; ++r) {
        EXPECT_EQ(s.placement.stages_held(r), f.parameter_copies) << "rank " << r;
        EXPECT_EQ(sim.metrics.per_rank[r].stages_held, f.parameter_copies) << "rank " << r;
      }
    }
  }
  EXPECT_GT(accepted, 0) << kind << " accepts nothing on the grid";
  RecordProperty("accepted", accepted);
  RecordProperty("rejected", rejected);
}

// The families without parameter rules serve every (R, M) of the grid.
TEST(Generators, UnrestrictedFamiliesAcceptTheWholeGrid) {
  for (const char* kind : {"gpipe", "1f1b", "zb-h1", "zb-h2"}) {
    for (int R : {1, 2, 3, 4, 6, 8}) {
      for (int M = 1; M <= 4 * R; ++M) {
        EXPECT_NO_THROW(make_schedule(kind, ScheduleOptions{R, M})) << kind << " R=" << R << " M=" << M;
      }
    }
  }
}

TEST_P(GeneratorGrid, RejectsNonPositiveSizes) {
  const std::string kind = GetParam();
  EXPECT_THROW(make_schedule(kind, ScheduleOptions{0, 8}), InvalidArgument);
  EXPECT_THROW(make_schedule(kind, ScheduleOptions{4, 0}), InvalidArgument);
  EXPECT_THROW(make_schedule(kind, ScheduleOptions{-1, 8}), InvalidArgument);
}

std::vector<std::string> generator_names() {
  std::vector<std::string> names;
  for (const GeneratorInfo& g : generators()) names.emplace_back(g.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(AllGenerators, GeneratorGrid, ::testing::ValuesIn(generator_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

TEST(Generators, RegistryListsEverySpecFamily) {
  const std::vector<std::string> expected = {"gpipe", "1f1b",    "interleaved-1f1b", "combined-1f1b", "zb-h1",
                                             "zb-h2", "zbv",     "chimera",          "dualpipe",      "dualpipev"};
  EXPECT_EQ(generator_names(), expected);
  for (const GeneratorInfo& g : generators()) EXPECT_FALSE(g.summary.empty()) << g.name;
}

TEST(Generators, UnknownKindListsTheKnownOnes) {
  test::expect_error_with([] { make_schedule("pipedream", ScheduleOptions{}); }, {"'pipedream'", "dualpipe", "gpipe"});
}

// Hand-derived orders of the simple families (spec section 6), small enough to write out.
TEST(Generators, GPipeOrder) {
  const Schedule s = make_gpipe(ScheduleOptions{2, 3});
  EXPECT_EQ(test::join(s.actions[0]), "0F0 0F1 0F2 0B0 0B1 0B2");
  EXPECT_EQ(test::join(s.actions[1]), "1F0 1F1 1F2 1B0 1B1 1B2");
}

TEST(Generators, OneFOneBOrder) {
  // R=3, M=4: rank r warms up with min(R-r-1, M) forwards, alternates F,B, then drains.
  const Schedule s = make_1f1b(ScheduleOptions{3, 4});
  EXPECT_EQ(test::join(s.actions[0]), "0F0 0F1 0F2 0B0 0F3 0B1 0B2 0B3");
  EXPECT_EQ(test::join(s.actions[1]), "1F0 1F1 1B0 1F2 1B1 1F3 1B2 1B3");
  EXPECT_EQ(test::join(s.actions[2]), "2F0 2B0 2F1 2B1 2F2 2B2 2F3 2B3");
  // M smaller than the warm-up: all forwards first.
  const Schedule few = make_1f1b(ScheduleOptions{3, 1});
  EXPECT_EQ(test::join(few.actions[0]), "0F0 0B0");
}

TEST(Generators, ZeroBubbleOrders) {
  // Stage i emits, for x = 0, 1, ..., F_x, I_{x-k(S-1-i)}, W_{x-k(S-1)} (each only in [0, M)). S=2, M=3.
  //  ZB-H1 (k=1): stage 0: x=0 F0; x=1 F1 I0 W0; x=2 F2 I1 W1; x=3 I2 W2.
  //               stage 1: x=0 F0 I0; x=1 F1 I1 W0; x=2 F2 I2 W1; x=3 W2.
  const Schedule h1 = make_zb_h1(ScheduleOptions{2, 3});
  EXPECT_EQ(test::join(h1.actions[0]), "0F0 0F1 0I0 0W0 0F2 0I1 0W1 0I2 0W2");
  EXPECT_EQ(test::join(h1.actions[1]), "1F0 1I0 1F1 1I1 1W0 1F2 1I2 1W1 1W2");
  //  ZB-H2 (k=2): stage 0: I lags 2, W lags 2: F0 | F1 | F2 I0 W0 | I1 W1 | I2 W2.
  //               stage 1: I lags 0, W lags 2: F0 I0 | F1 I1 | F2 I2 W0 | W1 | W2.
  const Schedule h2 = make_zb_h2(ScheduleOptions{2, 3});
  EXPECT_EQ(test::join(h2.actions[0]), "0F0 0F1 0F2 0I0 0W0 0I1 0W1 0I2 0W2");
  EXPECT_EQ(test::join(h2.actions[1]), "1F0 1I0 1F1 1I1 1F2 1I2 1W0 1W1 1W2");
}

}  // namespace
}  // namespace dualpipe
