// The tolerance with which the simulator's searches compare times and memory (internal to src/sim/): sums of
// durations in another order differ in their last bits, and two such values must still compare equal.
#pragma once

#include <limits>

namespace dualpipe::detail {

inline constexpr double kEps = 1e-9;
inline constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace dualpipe::detail
