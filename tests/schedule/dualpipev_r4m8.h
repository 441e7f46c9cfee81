// DualPipeV R=4, M=8 derived by hand from spec section 5: the expected order of test_dualpipe_order.cpp and
// the text form of the hand-written CSV of test_pytorch_csv.cpp.
#pragma once

namespace dualpipe::test {

// DualPipeV R=4, M=8 (spec section 5), rank r holds stage r (p0) and 7-r (p1); the FIFO of deferred
// weights decides each W.
//  rank 0: 1: 0F0..0F5 | 2: 0F6 7F0 | 3 (x3): 7I0 7W0 7F1 7I1 7W1 7F2 7I2 7W2 7F3
//          4 (x1): (0F7;7B3) (7F4;0B0) | 5 (x3): 7B4 (7F5;0B1) 7B5 (7F6;0B2) 7B6 (7F7;0B3)
//          6 (x1, r even, defer from B(p0) at i=0): 7B7 0I4 | 7: 0W4 0I5 0W5 0I6 0W6 0I7 | 8: 0W7
//  rank 1: 1: 1F0..1F3 | 2: 1F4 6F0 1F5 6F1 | 3: 6I0 6W0 6F2 6I1 6W1 6F3
//          4 (x2): (1F6;6B2) (6F4;1B0) (1F7;6B3) (6F5;1B1) | 5: 6B4 (6F6;1B2) 6B5 (6F7;1B3)
//          6 (r odd, defer from B(p1) at i=1): 6B6 1B4 6I7 1I5 | 7: 6W7 1I6 1W5 1I7 | 8: 1W6 1W7
//  rank 2: 1: 2F0 2F1 | 2: 2F2 5F0 2F3 5F1 2F4 5F2 | 3: 5I0 5W0 5F3
//          4 (x3): (2F5;5B1) (5F4;2B0) (2F6;5B2) (5F5;2B1) (2F7;5B3) (5F6;2B2) | 5: 5B4 (5F7;2B3)
//          6 (r even, defer from B(p0) at i=1): 5B5 2B4 5B6 2I5 5I7 2I6 | 7: 2W5 2I7 | 8: 5W7 2W6 2W7
//  rank 3 (last rank, first pair split): 2: 3F0 4F0 3F1 4F1 3F2 4F2 3F3 4F3
//          4 (x4): 3F4 4B0 (4F4;3B0) (3F5;4B1) (4F5;3B1) (3F6;4B2) (4F6;3B2) (3F7;4B3) (4F7;3B3)
//          6 (r odd, defer from B(p1) at i=2): 4B4 3B4 4B5 3B5 4I6 3I6 4I7 3I7 | 8: 4W6 3W6 4W7 3W7
inline constexpr const char* kDualPipeVR4M8 =
    "rank 0: 0F0 0F1 0F2 0F3 0F4 0F5 0F6 7F0 7I0 7W0 7F1 7I1 7W1 7F2 7I2 7W2 7F3 (0F7;7B3) (7F4;0B0) 7B4 "
    "(7F5;0B1) 7B5 (7F6;0B2) 7B6 (7F7;0B3) 7B7 0I4 0W4 0I5 0W5 0I6 0W6 0I7 0W7\n"
    "rank 1: 1F0 1F1 1F2 1F3 1F4 6F0 1F5 6F1 6I0 6W0 6F2 6I1 6W1 6F3 (1F6;6B2) (6F4;1B0) (1F7;6B3) (6F5;1B1) "
    "6B4 (6F6;1B2) 6B5 (6F7;1B3) 6B6 1B4 6I7 1I5 6W7 1I6 1W5 1I7 1W6 1W7\n"
    "rank 2: 2F0 2F1 2F2 5F0 2F3 5F1 2F4 5F2 5I0 5W0 5F3 (2F5;5B1) (5F4;2B0) (2F6;5B2) (5F5;2B1) (2F7;5B3) "
    "(5F6;2B2) 5B4 (5F7;2B3) 5B5 2B4 5B6 2I5 5I7 2I6 2W5 2I7 5W7 2W6 2W7\n"
    "rank 3: 3F0 4F0 3F1 4F1 3F2 4F2 3F3 4F3 3F4 4B0 (4F4;3B0) (3F5;4B1) (4F5;3B1) (3F6;4B2) (4F6;3B2) "
    "(3F7;4B3) (4F7;3B3) 4B4 3B4 4B5 3B5 4I6 3I6 4I7 3I7 4W6 3W6 4W7 3W7\n";

}  // namespace dualpipe::test
