// The process mesh layout against hand-worked examples (mesh.h's picture) and exhaustive invariants: every rank
// is in exactly one pipeline, one DP group and one EP group, and the groups agree with the coordinates.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "dualpipe/parallel/mesh.h"
#include "dualpipe/util/error.h"

namespace {

using namespace dualpipe::parallel;
using Ranks = std::vector<int>;

TEST(ProcessMesh, TheLayoutOfTheHeadersPicture) {
  const ProcessMesh mesh({2, 4, 2});
  EXPECT_EQ(mesh.world_size(), 8);
  EXPECT_EQ(mesh.pipeline_group(0), (Ranks{0, 1}));
  EXPECT_EQ(mesh.pipeline_group(3), (Ranks{6, 7}));
  EXPECT_EQ(mesh.data_parallel_group(0), (Ranks{0, 2, 4, 6}));
  EXPECT_EQ(mesh.data_parallel_group(1), (Ranks{1, 3, 5, 7}));
  EXPECT_EQ(mesh.expert_group(0), (Ranks{0, 2}));
  EXPECT_EQ(mesh.expert_group(2), (Ranks{0, 2}));
  EXPECT_EQ(mesh.expert_group(5), (Ranks{5, 7}));
  EXPECT_EQ(mesh.expert_data_parallel_group(0), (Ranks{0, 4}));
  EXPECT_EQ(mesh.expert_data_parallel_group(2), (Ranks{2, 6}));
  EXPECT_EQ(mesh.expert_data_parallel_group(7), (Ranks{3, 7}));
  const MeshCoordinates c = mesh.coordinates(5);
  EXPECT_EQ(c.pipeline_rank, 1);
  EXPECT_EQ(c.replica, 2);
  EXPECT_EQ(c.expert_rank, 0);
  EXPECT_EQ(mesh.dims().to_string(), "PP=2 x DP=4 (EP=2)");
}

// DualPipe on PP 4 x DP 2 with EP 2: stage 1 sits on pipeline ranks 1 and 2 (its mirrored copy), so its
// gradients are summed over ranks 1, 2 (replica 0) and 5, 6 (replica 1); its experts of expert rank 1 over the
// copies in replica 1 alone.
TEST(ProcessMesh, TheHoldersOfAStagesCopiesInEveryReplica) {
  const ProcessMesh mesh({4, 2, 2});
  EXPECT_EQ(mesh.holders_group({1, 2}), (Ranks{1, 2, 5, 6}));
  EXPECT_EQ(mesh.holders_group({0, 3}), (Ranks{0, 3, 4, 7}));
  EXPECT_EQ(mesh.holders_group({2}), mesh.data_parallel_group(2));
  EXPECT_EQ(mesh.expert_holders_group({1, 2}, 0), (Ranks{1, 2}));
  EXPECT_EQ(mesh.expert_holders_group({1, 2}, 1), (Ranks{5, 6}));
  const ProcessMesh wide({2, 4, 2});
  EXPECT_EQ(wide.expert_holders_group({0, 1}, 1), (Ranks{2, 3, 6, 7}));
  EXPECT_EQ(wide.expert_holders_group({1}, 0), wide.expert_data_parallel_group(5));
  EXPECT_THROW(wide.expert_holders_group({0}, 2), dualpipe::Error);
}

// Tensor parallelism innermost (Megatron's order): PP 2 x DP 2 x TP 2, rank = (d x 2 + p) x 2 + t.
//
//            replica d=0          d=1
//   stage rank p=0  t=0: 0, t=1: 1    4, 5       tensor groups {0, 1}, {2, 3}, {4, 5}, {6, 7}
//   stage rank p=1       2,      3    6, 7       pipelines of t=0: {0, 2}, {4, 6}; of t=1: {1, 3}, {5, 7}
TEST(ProcessMesh, TensorParallelRanksAreConsecutiveAndEveryOtherGroupKeepsItsTensorRank) {
  const ProcessMesh mesh({2, 2, 1, 2});
  EXPECT_EQ(mesh.world_size(), 8);
  EXPECT_EQ(mesh.dims().to_string(), "PP=2 x DP=2 x TP=2");
  EXPECT_EQ(mesh.tensor_group(0), (Ranks{0, 1}));
  EXPECT_EQ(mesh.tensor_group(5), (Ranks{4, 5}));
  EXPECT_EQ(mesh.pipeline_group(0, 0), (Ranks{0, 2}));
  EXPECT_EQ(mesh.pipeline_group(0, 1), (Ranks{1, 3}));
  EXPECT_EQ(mesh.pipeline_group(1, 1), (Ranks{5, 7}));
  EXPECT_EQ(mesh.data_parallel_group(0, 0), (Ranks{0, 4}));
  EXPECT_EQ(mesh.data_parallel_group(1, 1), (Ranks{3, 7}));
  EXPECT_EQ(mesh.holders_group({0, 1}, 1), (Ranks{1, 3, 5, 7}));
  const MeshCoordinates c = mesh.coordinates(6);
  EXPECT_EQ(c.pipeline_rank, 1);
  EXPECT_EQ(c.replica, 1);
  EXPECT_EQ(c.tensor_rank, 0);
  EXPECT_EQ(mesh.rank_of(1, 1, 1), 7);
}

// PP=2 x DP=1 x CP=2 x TP=2, rank ((d P + p) C + c) T + t:
//                      c=0: t=0, t=1   c=1: t=0, t=1
//   stage rank p=0          0,   1          2,   3     tensor groups {0, 1}, {2, 3}, ...; context groups {0, 2},
//   stage rank p=1          4,   5          6,   7     {1, 3}, {4, 6}, {5, 7}; pipelines {0, 4}, {1, 5}, ...
TEST(ProcessMesh, ContextParallelRanksSitBetweenTensorAndPipelineRanks) {
  const ProcessMesh mesh({2, 1, 1, 2, 2});
  EXPECT_EQ(mesh.world_size(), 8);
  EXPECT_EQ(mesh.dims().to_string(), "PP=2 x DP=1 x CP=2 x TP=2");
  EXPECT_EQ(mesh.tensor_group(2), (Ranks{2, 3}));
  EXPECT_EQ(mesh.tensor_group(7), (Ranks{6, 7}));
  EXPECT_EQ(mesh.context_group(0), (Ranks{0, 2}));
  EXPECT_EQ(mesh.context_group(3), (Ranks{1, 3}));
  EXPECT_EQ(mesh.context_group(5), (Ranks{5, 7}));
  EXPECT_EQ(mesh.pipeline_group(0, 0), (Ranks{0, 4}));
  EXPECT_EQ(mesh.pipeline_group(0, 3), (Ranks{3, 7}));  // inner rank c T + t = 3: c = 1, t = 1
  const MeshCoordinates c = mesh.coordinates(6);
  EXPECT_EQ(c.pipeline_rank, 1);
  EXPECT_EQ(c.context_rank, 1);
  EXPECT_EQ(c.tensor_rank, 0);
  EXPECT_EQ(c.inner, 2);
  EXPECT_EQ(mesh.rank_of(1, 0, 3), 7);
}

TEST(ProcessMesh, EveryRankIsInOneGroupOfEachKindThatAgreesWithItsCoordinates) {
  for (int tp = 1; tp <= 3; ++tp)
  for (int pp = 1; pp <= 4; ++pp) {
    for (int dp = 1; dp <= 6; ++dp) {
      for (int ep = 1; ep <= dp; ++ep) {
        if (dp % ep != 0) continue;
        const ProcessMesh mesh({pp, dp, ep, tp});
        std::multiset<int> in_pipelines, in_dp, in_tp;
        for (int t = 0; t < tp; ++t) {
          for (int d = 0; d < dp; ++d)
            for (int r : mesh.pipeline_group(d, t)) in_pipelines.insert(r);
          for (int p = 0; p < pp; ++p)
            for (int r : mesh.data_parallel_group(p, t)) in_dp.insert(r);
        }
        for (int r = 0; r < mesh.world_size(); r += tp)
          for (int member : mesh.tensor_group(r)) in_tp.insert(member);
        for (int r = 0; r < mesh.world_size(); ++r) {
          EXPECT_EQ(in_pipelines.count(r), 1u);
          EXPECT_EQ(in_dp.count(r), 1u);
          EXPECT_EQ(in_tp.count(r), 1u);
          const MeshCoordinates c = mesh.coordinates(r);
          EXPECT_EQ(mesh.rank_of(c.pipeline_rank, c.replica, c.tensor_rank), r);
          EXPECT_EQ(mesh.pipeline_group(c.replica, c.tensor_rank)[static_cast<std::size_t>(c.pipeline_rank)], r);
          EXPECT_EQ(mesh.data_parallel_group(c.pipeline_rank, c.tensor_rank)[static_cast<std::size_t>(c.replica)], r);
          const Ranks tensor = mesh.tensor_group(r);
          ASSERT_EQ(static_cast<int>(tensor.size()), tp);
          EXPECT_EQ(tensor[static_cast<std::size_t>(c.tensor_rank)], r);
          EXPECT_EQ(tensor.back() - tensor.front(), tp - 1);  // consecutive: one machine's
          for (int other : tensor) {
            EXPECT_EQ(mesh.coordinates(other).pipeline_rank, c.pipeline_rank);
            EXPECT_EQ(mesh.coordinates(other).replica, c.replica);
          }
          const Ranks group = mesh.expert_group(r);
          ASSERT_EQ(static_cast<int>(group.size()), ep);
          EXPECT_EQ(group[static_cast<std::size_t>(c.expert_rank)], r);
          for (int other : group) {
            EXPECT_EQ(mesh.coordinates(other).pipeline_rank, c.pipeline_rank);  // same stage rank
            EXPECT_EQ(mesh.coordinates(other).tensor_rank, c.tensor_rank);      // same slices
            EXPECT_EQ(mesh.expert_group(other), group);                          // the same group seen from each
          }
          // Its expert-data-parallel group: one rank of each EP group of its stage, all with its expert rank.
          const Ranks holders = mesh.expert_data_parallel_group(r);
          ASSERT_EQ(static_cast<int>(holders.size()), dp / ep);
          EXPECT_EQ(std::count(holders.begin(), holders.end(), r), 1);
          for (int other : holders) {
            EXPECT_EQ(mesh.coordinates(other).pipeline_rank, c.pipeline_rank);
            EXPECT_EQ(mesh.coordinates(other).expert_rank, c.expert_rank);
            EXPECT_EQ(mesh.coordinates(other).tensor_rank, c.tensor_rank);
            EXPECT_EQ(mesh.expert_data_parallel_group(other), holders);
          }
        }
      }
    }
  }
}

TEST(ProcessMesh, ShapesBreakingTheRulesAreRefusedNamingTheValue) {
  auto message = [](ParallelDims shape) {
    try {
      ProcessMesh mesh(shape);
    } catch (const dualpipe::InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(message({2, 4, 3}), "--ep 3 must divide --dp 4: expert parallelism runs across the data-parallel replicas "
                                "of a stage");
  EXPECT_EQ(message({0, 1, 1}), "--pp must be at least 1, got 0");
  EXPECT_EQ(message({1, 0, 1}), "--dp must be at least 1, got 0");
  EXPECT_EQ(message({1, 1, 0}), "--ep must be at least 1, got 0");
  EXPECT_EQ(message({1000, 1000, 1}), "--pp 1000 x --dp 1000 is 1000000 ranks, above the limit of 65536");
  EXPECT_EQ(message({1, 1, 1, 0}), "--tp must be at least 1, got 0");
  EXPECT_EQ(message({100, 100, 1, 8}), "--pp 100 x --dp 100 x --tp 8 is 80000 ranks, above the limit of 65536");
}

// The sizes' rules, one home for the trainer and the planner: the same rule in each one's spelling.
TEST(ParallelDims, EachRuleIsNamedInTheTrainersAndThePlannersWords) {
  ParallelDims d;
  d.pp = 2, d.dp = 4, d.ep = 8;
  EXPECT_EQ(broken_rule(d, DimsSpelling::Options),
            "--ep 8 must divide --dp 4: expert parallelism runs across the data-parallel replicas of a stage");
  EXPECT_EQ(broken_rule(d, DimsSpelling::Fix),
            "ep=8 must divide dp=4: expert parallelism runs across the data-parallel replicas of a stage");
  d.ep = 4;
  EXPECT_EQ(broken_rule(d, DimsSpelling::Options), "");
  EXPECT_EQ(d.expert_replicas(), 1);
  EXPECT_EQ(broken_rule(d, 0, DimsSpelling::Options), "--ep 4 needs an MoE model: give --experts N");
  EXPECT_EQ(broken_rule(d, 0, DimsSpelling::Fix), "ep=4: the model has no experts");
  EXPECT_EQ(broken_rule(d, 6, DimsSpelling::Fix),
            "ep=4 must divide the model's 6 experts: each rank of an expert-parallel group holds the same number of "
            "experts");
  EXPECT_EQ(broken_rule(d, 8, DimsSpelling::Options), "");
  d.tp = 0;
  EXPECT_EQ(broken_rule(d, DimsSpelling::Fix), "tp must be at least 1, got 0");
  d.tp = 8, d.cp = 2;
  EXPECT_EQ(d.world_size(), 2 * 4 * 2 * 8);
  EXPECT_EQ(world_product(d, DimsSpelling::Fix), "pp=2 x dp=4 x cp=2 x tp=8");
  // The planner weighs clusters larger than one job's mesh: only a mesh holds the world to its limit.
  d.pp = 1000, d.dp = 1000, d.ep = 1, d.tp = 1, d.cp = 1;
  EXPECT_EQ(broken_rule(d, DimsSpelling::Fix), "");
  EXPECT_THROW(ProcessMesh{d}, dualpipe::InvalidArgument);
}

}  // namespace
