// Reading a schedule's text a line at a time within the limits (internal; text_format.cpp, pytorch_csv.cpp).
#pragma once

#include <cstddef>
#include <string_view>

#include "dualpipe/util/error.h"

namespace dualpipe {

// Takes the next line off `rest` (without its '\n') and counts it in `number`. Throws InvalidArgument naming it
// (`what` and the number: "CSV line 3") when it is longer than `max_line_bytes`.
inline std::string_view next_line(std::string_view& rest, int& number, std::size_t max_line_bytes,
                                  std::string_view what) {
  const std::size_t newline = rest.find('\n');
  const std::string_view line = rest.substr(0, newline);
  rest.remove_prefix(newline == std::string_view::npos ? rest.size() : newline + 1);
  ++number;
  DUALPIPE_REQUIRE(line.size() <= max_line_bytes, what, " ", number, " is ", line.size(), " bytes long, above the "
                   "limit of ", max_line_bytes, " bytes per line");
  return line;
}

}  // namespace dualpipe
