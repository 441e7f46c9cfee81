// `plan --memory-limit`: activations, or bytes turned into activations.
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "dualpipe/sim/planner.h"
#include "dualpipe/util/byte_size.h"
#include "dualpipe/util/error.h"

namespace dualpipe {

double activation_limit(const std::string& text, const CostModel& costs, const std::string& what) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(begin, &end);
  DUALPIPE_REQUIRE(end != begin && !std::isspace(static_cast<unsigned char>(*begin)), what, " '", text,
                   "' is not a number (activations) or a size in bytes such as 24GiB");
  DUALPIPE_REQUIRE(std::isfinite(value) && value >= 0, what, " must be a finite number >= 0, got '", text, "'");
  const std::string unit = end;
  if (unit.empty()) return value;
  const std::optional<double> factor = byte_unit_factor(unit);
  DUALPIPE_REQUIRE(factor.has_value(), what, " '", text, "': unknown unit '", unit,
                   "' (activations without a unit, or bytes in ", kByteUnitsHelp, ")");
  DUALPIPE_REQUIRE(costs.activation_bytes > 0, what, " ", text, " is in bytes: give the bytes of one stage "
                   "activation too (--cost act_bytes=N, for a 1/R slice of the model)");
  return value * *factor / costs.activation_bytes;
}

}  // namespace dualpipe
