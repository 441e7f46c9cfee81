// The launcher's node layout on its own (until now tested through `dualpipe launch` and `train` processes): which
// global ranks each node runs, by torchrun's contract, worked out by hand for even and uneven worlds, and the
// variables each rank gets.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dualpipe/launch/node_layout.h"
#include "test_helpers.h"

namespace dualpipe::launch {
namespace {

TEST(NodeLayout, EachNodeRunsItsBlockOfRanks) {
  // 3 nodes of 4: node K runs ranks 4K .. 4K+3.
  for (int node = 0; node < 3; ++node) {
    const NodeLayout l = layout_per_node(3, node, 4);
    EXPECT_EQ(l.world_size, 12);
    EXPECT_EQ(l.first_rank(), 4 * node);
    EXPECT_EQ(l.local_ranks(), 4);
  }
}

TEST(NodeLayout, AWorldThatDoesNotDivideLeavesTheLastNodeFewer) {
  // 10 ranks over 3 nodes: ceil(10/3) = 4 per node, so 4, 4 and 2.
  const int expected[] = {4, 4, 2};
  for (int node = 0; node < 3; ++node) {
    const NodeLayout l = layout_for_world(10, 3, node, 0);
    EXPECT_EQ(l.first_rank(), 4 * node);
    EXPECT_EQ(l.local_ranks(), expected[node]);
  }
  // 4 ranks over 3 nodes at 2 each leave node 2 nothing: refused, naming the node.
  EXPECT_FALSE(test::error_text([] { layout_for_world(4, 3, 2, 2); }).empty());
  EXPECT_FALSE(test::error_text([] { layout_per_node(2, 2, 4); }).empty());  // node 2 of 2 nodes
}

TEST(NodeLayout, EveryRankGetsTorchrunsVariables) {
  const NodeLayout l = layout_per_node(2, 1, 2);  // ranks 2 and 3
  const std::vector<std::string> env = rank_environment(l, 1, "10.0.0.1", 29500, 0, 3);
  for (const char* variable : {"RANK=3", "LOCAL_RANK=1", "GROUP_RANK=1", "WORLD_SIZE=4", "LOCAL_WORLD_SIZE=2",
                               "MASTER_ADDR=10.0.0.1", "MASTER_PORT=29500", "TORCHELASTIC_RESTART_COUNT=0",
                               "TORCHELASTIC_MAX_RESTARTS=3"})
    EXPECT_NE(std::find(env.begin(), env.end(), variable), env.end()) << variable;
  // The launcher clears exactly the names it sets.
  EXPECT_EQ(env.size(), rank_environment_names().size());
}

}  // namespace
}  // namespace dualpipe::launch
