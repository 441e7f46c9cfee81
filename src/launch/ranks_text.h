// "1 rank", "4 ranks": how the launcher's messages count ranks (internal to src/launch/).
#pragma once

#include <string>

#include "dualpipe/util/error.h"

namespace dualpipe::launch {

inline std::string ranks_text(int n) { return detail::concat(n, n == 1 ? " rank" : " ranks"); }

}  // namespace dualpipe::launch
