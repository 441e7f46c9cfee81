// Several ranks' profiler traces side by side (issue 49, item 4): each rank's clock put on the first rank's by the
// collectives they share (unless all ran on one host), and the slowest rank named, on traces written by hand with a
// known clock difference.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "dualpipe/trace/kineto_ranks.h"
#include "dualpipe/util/error.h"

namespace dualpipe {
namespace {

namespace fs = std::filesystem;

// A rank's trace: three gloo all-reduces ending at `ends` (its own clock) and a ProfilerStep of `step` us.
std::string rank_trace(int rank, std::vector<double> ends, double step, const std::string& host = "") {
  std::string events = "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#1\", \"pid\": 1, "
                       "\"tid\": 1, \"ts\": " + std::to_string(ends[0] - 50) + ", \"dur\": " + std::to_string(step) + "}";
  for (double end : ends)
    events += ", {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"gloo:all_reduce\", \"pid\": 1, \"tid\": 2, "
              "\"ts\": " + std::to_string(end - 10) + ", \"dur\": 10}";
  const std::string info = rank < 0 ? "" : ", \"distributedInfo\": {\"backend\": \"gloo\", \"rank\": " +
                                               std::to_string(rank) + ", \"world_size\": 2}";
  const std::string run = host.empty() ? "" : ", \"dualpipe\": {\"host\": \"" + host + "\", \"host_cores\": 2}";
  return "{\"traceEvents\": [" + events + "]" + info + run + "}";
}

class KinetoRankFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kineto_ranks_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  fs::path dir_;
};

TEST_F(KinetoRankFiles, ClocksAreAlignedOnSharedCollectivesAndTheSlowestRankIsNamed) {
  // Rank 1's clock runs 5 s ahead; its collectives end within 1-3 us of rank 0's; its step is 50% longer.
  write("b.json", rank_trace(0, {100, 200, 300}, 100));
  write("a.json", rank_trace(1, {5000101, 5000203, 5000302}, 150));
  const dualpipe::KinetoRanks ranks = read_kineto_ranks({dir_.string()});
  ASSERT_EQ(ranks.ranks.size(), 2u);
  EXPECT_EQ(ranks.ranks[0].rank, 0);  // by distributedInfo.rank, not by file name
  EXPECT_DOUBLE_EQ(ranks.ranks[0].clock_offset, 0);
  EXPECT_DOUBLE_EQ(ranks.ranks[1].clock_offset, -5000002);  // the median difference of the three ends
  EXPECT_EQ(ranks.ranks[1].collectives_matched, 3);
  EXPECT_DOUBLE_EQ(ranks.ranks[1].step, 150);
  EXPECT_EQ(ranks.ranks[ranks.slowest].rank, 1);
  EXPECT_DOUBLE_EQ(ranks.median_step, 125);
}

// Two ranks that recorded one host read its clock: their collectives' ends differ by 2 ms (two pipeline ranks'
// reductions, each over its own replicas), which is not a clock difference.
TEST_F(KinetoRankFiles, RanksOfOneHostKeepTheirClock) {
  write("r0.json", rank_trace(0, {100, 200, 300}, 100, "box"));
  write("r1.json", rank_trace(1, {2100, 2200, 2300}, 100, "box"));
  const dualpipe::KinetoRanks ranks = read_kineto_ranks({dir_.string()});
  ASSERT_EQ(ranks.ranks.size(), 2u);
  EXPECT_EQ(ranks.host, "box");
  ASSERT_EQ(ranks.ranks[1].collectives.size(), 3u);  // the process group's collectives, for plan --from-kineto
  EXPECT_EQ(ranks.ranks[1].collectives[0].name, "gloo:all_reduce");
  EXPECT_DOUBLE_EQ(ranks.ranks[1].collectives[0].start, 2090);
  EXPECT_DOUBLE_EQ(ranks.ranks[1].collectives[0].end, 2100);
  EXPECT_DOUBLE_EQ(ranks.ranks[1].clock_offset, 0);
  EXPECT_EQ(ranks.ranks[1].collectives_matched, 0);
  // On two hosts the collectives align them.
  write("r1.json", rank_trace(1, {2100, 2200, 2300}, 100, "other"));
  const dualpipe::KinetoRanks two = read_kineto_ranks({dir_.string()});
  EXPECT_EQ(two.host, "");
  EXPECT_DOUBLE_EQ(two.ranks[1].clock_offset, -2000);
}

TEST_F(KinetoRankFiles, TracesWithoutRanksAreTakenInOrderAndTwoOfOneRankAreRefused) {
  const std::string first = write("r0.json", rank_trace(-1, {100, 200, 300}, 100));
  const std::string second = write("r1.json", rank_trace(-1, {100, 200, 300}, 90));
  const dualpipe::KinetoRanks ranks = read_kineto_ranks({first, second});
  EXPECT_EQ(ranks.ranks[1].rank, 1);
  EXPECT_EQ(ranks.ranks[ranks.slowest].rank, 0);

  const std::string again = write("r2.json", rank_trace(0, {100, 200, 300}, 100));
  const std::string twin = write("r3.json", rank_trace(0, {100, 200, 300}, 100));
  try {
    read_kineto_ranks({again, twin});
    FAIL() << "two traces of rank 0 were accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("are both of rank 0"), std::string::npos) << e.what();
  }
  fs::create_directories(dir_ / "empty");
  EXPECT_THROW(read_kineto_ranks({(dir_ / "empty").string()}), InvalidArgument);
}

}  // namespace
}  // namespace dualpipe
