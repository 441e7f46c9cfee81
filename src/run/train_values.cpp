#include "dualpipe/run/train_values.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "dualpipe/sim/cost_model.h"
#include "dualpipe/sim/layer_partition.h"
#include "dualpipe/util/error.h"

namespace dualpipe::run {

void refuse_word(const char* option, const std::string& words, const std::string& text) {
  throw InvalidArgument(detail::concat(option, " must be ", words, ", got '", text, "'"));
}

std::vector<int> parse_layer_counts(const std::string& text) {
  std::vector<int> counts;
  if (text.empty()) return counts;  // the default: a balanced cut
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    char* end = nullptr;
    const long n = item.empty() ? 0 : std::strtol(item.c_str(), &end, 10);
    DUALPIPE_REQUIRE(!item.empty() && end && *end == '\0' && n >= 1 && n <= 100000, "--layers-per-stage '", text,
                     "': '", item, "' is not a positive layer count (write counts like 3,4,4,3)");
    DUALPIPE_REQUIRE(counts.size() < 4096, "--layers-per-stage has more than 4096 counts (one per stage)");
    counts.push_back(static_cast<int>(n));
    start = comma + 1;
  }
  return counts;
}

std::string format_layer_counts(const std::vector<int>& counts) { return format_cut(counts); }

std::vector<double> parse_speeds(const std::string& text) {
  return text.empty() ? std::vector<double>{} : parse_rank_speed(text);  // empty: every rank at 1
}

std::string speeds_text(const std::vector<double>& speeds) {
  std::string text;
  for (const double speed : speeds) {
    // The shortest of 15 or 17 digits that reads back as the same double: 0.67, not 0.67000000000000004.
    char number[32];
    std::snprintf(number, sizeof number, "%.15g", speed);
    if (std::strtod(number, nullptr) != speed) std::snprintf(number, sizeof number, "%.17g", speed);
    text += (text.empty() ? "" : ",") + std::string(number);
  }
  return text;
}

}  // namespace dualpipe::run
