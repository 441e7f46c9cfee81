// Overlapped pairs taken apart, for stages that cannot overlap a forward with a backward (a Python module without
// DeepSeek's overlapped_forward_backward hook runs the two halves one after the other anyway). As a pair, both
// halves' inputs are received before it and both outputs sent after it: the forward waits for the backward's
// gradient, and the next rank waits for the forward's output until the backward is done too. As two actions in the
// pair's order, lower_communication() places each half's messages around that half: the gradient can arrive while
// the forward runs, and the forward's output leaves before the backward starts. The compute order is unchanged, so
// are the results.
#pragma once

#include "dualpipe/schedule/schedule.h"

namespace dualpipe {

// Each overlapped (F;B) made F then B in its place. Takes a compute-only schedule, as lower_communication() does.
Schedule split_overlapped_pairs(const Schedule& schedule);

}  // namespace dualpipe
