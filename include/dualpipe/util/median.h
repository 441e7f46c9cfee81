// The median of measured times (the mean of the middle two for an even count), as the profile reader, its costs
// and its ranks report them.
#pragma once

#include <algorithm>
#include <vector>

namespace dualpipe {

// 0 for no values.
inline double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace dualpipe
