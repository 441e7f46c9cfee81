// The c10d groups of a process mesh hold exactly the ranks the layout says, in its order: a PP=2 x DP=4 (EP=2)
// world of 8 ranks run as threads over one in-memory store, where every rank all-reduces its world rank and
// gathers it in each of its groups. The reference is mesh.h's picture, worked by hand.
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/torch.h>

#include <thread>
#include <vector>

#include "dualpipe/parallel/process_groups.h"

namespace {

using namespace dualpipe::parallel;

// The world ranks of a group's members, in the group's rank order (an all-gather of each member's world rank).
std::vector<int> members(const c10::intrusive_ptr<c10d::ProcessGroup>& group, int world_rank) {
  std::vector<at::Tensor> mine = {torch::tensor({world_rank}, torch::kInt64)};
  std::vector<std::vector<at::Tensor>> gathered(1);
  for (int i = 0; i < group->getSize(); ++i) gathered[0].push_back(torch::zeros({1}, torch::kInt64));
  group->allgather(gathered, mine)->wait();
  std::vector<int> ranks;
  for (const at::Tensor& t : gathered[0]) ranks.push_back(static_cast<int>(t.item<int64_t>()));
  return ranks;
}

TEST(MeshGroups, EachGroupHoldsTheRanksOfTheLayoutInItsOrder) {
  const ProcessMesh mesh({2, 4, 2});
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::vector<int>> pipeline(8), data_parallel(8), expert(8), expert_backward(8),
      expert_data_parallel(8);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 8; ++r) {
    ranks.emplace_back([&, r] {
      at::set_num_threads(1);
      const MeshGroups groups = make_gloo_mesh_groups(store, mesh, r, std::chrono::seconds(30), "lo");
      pipeline[static_cast<std::size_t>(r)] = members(groups.pipeline, r);
      data_parallel[static_cast<std::size_t>(r)] = members(groups.data_parallel, r);
      expert[static_cast<std::size_t>(r)] = members(groups.expert, r);
      expert_backward[static_cast<std::size_t>(r)] = members(groups.expert_backward, r);
      expert_data_parallel[static_cast<std::size_t>(r)] = members(groups.expert_data_parallel, r);
    });
  }
  for (std::thread& t : ranks) t.join();
  using Ranks = std::vector<int>;
  // Rank 5 is stage rank 1 of replica 2 (mesh.h).
  EXPECT_EQ(pipeline[5], (Ranks{4, 5}));
  EXPECT_EQ(data_parallel[5], (Ranks{1, 3, 5, 7}));
  EXPECT_EQ(expert[5], (Ranks{5, 7}));
  EXPECT_EQ(pipeline[0], (Ranks{0, 1}));
  EXPECT_EQ(data_parallel[0], (Ranks{0, 2, 4, 6}));
  EXPECT_EQ(expert[2], (Ranks{0, 2}));
  EXPECT_EQ(expert[6], (Ranks{4, 6}));
  EXPECT_EQ(expert_backward, expert);
  EXPECT_EQ(expert_data_parallel[5], (Ranks{1, 5}));
  EXPECT_EQ(expert_data_parallel[2], (Ranks{2, 6}));
}

}  // namespace
