// torch.distributed.pipelining's compute-only CSV form (`_dump_csv` / `_load_csv`): one row per rank, one
// cell per action, "(0F7;7B3)OVERLAP_F_B" for an overlapped pair, empty cells for idle steps, written by
// Python's csv module (\r\n line endings, quotes around cells when it chooses to).
#include <gtest/gtest.h>

#include <string>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/lower.h"
#include "dualpipe/schedule/placement.h"
#include "dualpipe/schedule/pytorch_csv.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/schedule/validate.h"
#include "schedule/dualpipev_r4m8.h"
#include "test_helpers.h"

namespace dualpipe {
namespace {

// DualPipeV R=4 M=8 as a PyTorch-style CSV, written by hand from spec section 5 (the derivation of every
// rank is in dualpipev_r4m8.h). Idle steps are empty cells (rank 1 waits one step, rank 2 two,
// rank 3 three, as in a real timeline), some cells are quoted, lines end in \r\n.
constexpr const char* kDualPipeVCsv =
    "0F0,0F1,0F2,0F3,0F4,0F5,0F6,7F0,7I0,7W0,7F1,7I1,7W1,7F2,7I2,7W2,7F3,(0F7;7B3)OVERLAP_F_B,"
    "(7F4;0B0)OVERLAP_F_B,7B4,(7F5;0B1)OVERLAP_F_B,7B5,(7F6;0B2)OVERLAP_F_B,7B6,(7F7;0B3)OVERLAP_F_B,7B7,"
    "0I4,0W4,0I5,0W5,0I6,0W6,0I7,0W7\r\n"
    ",1F0,1F1,1F2,1F3,1F4,6F0,1F5,6F1,\"6I0\",6W0,6F2,6I1,6W1,6F3,\"(1F6;6B2)OVERLAP_F_B\",(6F4;1B0)OVERLAP_F_B,"
    "(1F7;6B3)OVERLAP_F_B,(6F5;1B1)OVERLAP_F_B,6B4,(6F6;1B2)OVERLAP_F_B,6B5,(6F7;1B3)OVERLAP_F_B,6B6,1B4,"
    "6I7,1I5,6W7,1I6,1W5,1I7,1W6,1W7,\r\n"
    ",,2F0,2F1,2F2,5F0,2F3,5F1,2F4,5F2,5I0,5W0,5F3,(2F5;5B1)OVERLAP_F_B,(5F4;2B0)OVERLAP_F_B,"
    "(2F6;5B2)OVERLAP_F_B,(5F5;2B1)OVERLAP_F_B,(2F7;5B3)OVERLAP_F_B,(5F6;2B2)OVERLAP_F_B,5B4,"
    "(5F7;2B3)OVERLAP_F_B,5B5,2B4,5B6,2I5,5I7,2I6,2W5,2I7,5W7,2W6,2W7\r\n"
    ",,,3F0,4F0,3F1,4F1,3F2,4F2,3F3,4F3,3F4,,4B0,(4F4;3B0)OVERLAP_F_B,(3F5;4B1)OVERLAP_F_B,"
    "(4F5;3B1)OVERLAP_F_B,(3F6;4B2)OVERLAP_F_B,(4F6;3B2)OVERLAP_F_B,(3F7;4B3)OVERLAP_F_B,"
    "(4F7;3B3)OVERLAP_F_B,4B4,3B4,4B5,3B5,4I6,3I6,4I7,3I7,4W6,3W6,4W7,3W7\r\n";

TEST(PyTorchCsv, ParsesHandWrittenCsv) {
  const Schedule s = parse_pytorch_csv(kDualPipeVCsv);
  EXPECT_EQ(format_text(s), test::kDualPipeVR4M8);  // the same orders in the text form
  EXPECT_EQ(s.kind, "custom");
  EXPECT_EQ(s.num_ranks, 4);
  EXPECT_EQ(s.num_stages, 8);
  EXPECT_EQ(s.num_microbatches, 8);
  EXPECT_EQ(s.placement, Placement::v_shape(4));
  // The cell "(0F7;7B3)OVERLAP_F_B" is rank 0's 18th action.
  EXPECT_EQ(s.actions[0][17], Action::overlapped(0, 7, 7, 3));
  EXPECT_TRUE(find_problems(s).empty()) << test::join_lines(find_problems(s));
}

TEST(PyTorchCsv, HandWrittenCsvIsTheDualPipeVGenerator) {
  // The generator agrees with the hand-written file (same actions, same placement).
  const Schedule generated = make_dualpipev(ScheduleOptions{4, 8});
  const Schedule parsed = parse_pytorch_csv(kDualPipeVCsv);
  EXPECT_EQ(parsed.actions, generated.actions);
  EXPECT_EQ(parsed.placement, generated.placement);
}

TEST(PyTorchCsv, TwoDirectionCsvWithPlainNewlines) {
  // DualPipe R=2 M=4 (hand-derived in test_dualpipe_order.cpp), \n line endings, no trailing newline.
  const Schedule s = parse_pytorch_csv(
      "0F0,1F2,,0F1,1B2,(1F3;0B0)OVERLAP_F_B,1B3,0I1,0W1\n"
      ",0F2,1F0,0F3,1B0,(1F1;0B2)OVERLAP_F_B,1B1,0I3,0W3");
  EXPECT_EQ(format_text(s),
            "rank 0: 0F0 1F2 0F1 1B2 (1F3;0B0) 1B3 0I1 0W1\n"
            "rank 1: 0F2 1F0 0F3 1B0 (1F1;0B2) 1B1 0I3 0W3\n");
  EXPECT_EQ(s.placement, Placement::bidirectional(2, {0, 0, 1, 1}));
}

TEST(PyTorchCsv, FormatPadsRowsAndMarksPairs) {
  // Written by hand: Python's csv.writer ends rows with \r\n; rows are padded to equal width with empty cells.
  const Schedule s = parse_text("rank 0: 0F0 0F1 (0F2;0B0) 0B1 0B2\nrank 1: 1F0\n");
  EXPECT_EQ(format_pytorch_csv(s), "0F0,0F1,(0F2;0B0)OVERLAP_F_B,0B1,0B2\r\n1F0,,,,\r\n");
}

TEST(PyTorchCsv, FormatLeavesCommunicationOut) {
  // 1F1B R=2 M=2: rank 0 runs 0F0 0F1 0B0 0B1, rank 1 runs 1F0 1B0 1F1 1B1 (spec section 6).
  const Schedule lowered = lower_communication(make_1f1b(ScheduleOptions{2, 2}));
  EXPECT_EQ(format_pytorch_csv(lowered), "0F0,0F1,0B0,0B1\r\n1F0,1B0,1F1,1B1\r\n");
}

TEST(PyTorchCsv, ExportThenImportKeepsComputeActionsAndPlacement) {
  int checked = 0;
  const auto counts = [](int R) { return std::vector<int>{1, R, 2 * R, 2 * R + 1, 4 * R}; };
  for (const auto& [name, R, M, s] : test::grid_schedules(counts)) {
    SCOPED_TRACE(name + " R=" + std::to_string(R) + " M=" + std::to_string(M));
    const Schedule back = parse_pytorch_csv(format_pytorch_csv(s));
    EXPECT_EQ(back.actions, s.actions);
    EXPECT_EQ(back.placement, s.placement);
    EXPECT_EQ(back.num_stages, s.num_stages);
    EXPECT_EQ(back.num_microbatches, s.num_microbatches);
    // Through a lowered schedule: the CSV holds compute actions only, so the import equals the original.
    const Schedule from_lowered = parse_pytorch_csv(format_pytorch_csv(lower_communication(s)));
    EXPECT_EQ(from_lowered.actions, s.actions);
    EXPECT_EQ(from_lowered.placement, s.placement);
    ++checked;
  }
  EXPECT_GT(checked, 30);
}

TEST(PyTorchCsv, TrailingEmptyRowsAreDropped) {
  const Schedule s = parse_pytorch_csv("0F0,0B0\r\n\r\n");
  EXPECT_EQ(s.num_ranks, 1);
}

TEST(PyTorchCsv, BadCellNamesLineRankAndCell) {
  test::expect_error_with([] { parse_pytorch_csv("0F0,0F1,0B0,0B1\r\n1F0,1Z0,1F1\r\n"); },
                          {"CSV line 2", "rank 1", "'1Z0'"});
}

TEST(PyTorchCsv, UnterminatedQuoteIsRejected) {
  test::expect_error_with([] { parse_pytorch_csv("0F0,\"0B0\r\n"); }, {"CSV line 1", "quote"});
}

TEST(PyTorchCsv, EmptyCsvIsRejected) {
  EXPECT_THROW(parse_pytorch_csv(""), InvalidArgument);
  EXPECT_THROW(parse_pytorch_csv(",,\r\n"), InvalidArgument);
}

}  // namespace
}  // namespace dualpipe
