#include "dualpipe/util/byte_size.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "dualpipe/util/error.h"

namespace dualpipe {

std::string describe_bytes(double bytes) {
  static const char* const kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 5) bytes /= 1024, ++unit;
  char text[64];
  if (unit == 0) std::snprintf(text, sizeof text, "%.0f bytes", bytes);
  else std::snprintf(text, sizeof text, bytes < 10 ? "%.1f %s" : "%.0f %s", bytes, kUnits[unit]);
  return text;
}

std::optional<double> byte_unit_factor(const std::string& unit) {
  std::string u;
  for (char c : unit) u += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (u.empty() || u == "B") return 1.0;
  static const char kPrefixes[] = "KMGT";
  for (int i = 0; kPrefixes[i]; ++i) {
    const std::string p(1, kPrefixes[i]);
    if (u == p || u == p + "IB") return std::pow(1024.0, i + 1);
    if (u == p + "B") return std::pow(1000.0, i + 1);
  }
  return std::nullopt;
}

std::int64_t parse_byte_size(const std::string& text, const std::string& what) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(begin, &end);
  const std::optional<double> factor = end != begin ? byte_unit_factor(end) : std::nullopt;
  const double bytes = factor ? value * *factor : 0;
  DUALPIPE_REQUIRE(factor && std::isfinite(bytes) && bytes >= 1 && bytes <= 9.0e18, what, ": cannot read memory size '",
                   text, "': expected a positive number of bytes with an optional unit, ", kByteUnitsHelp,
                   ", as in 4GiB");
  return static_cast<std::int64_t>(bytes);
}

}  // namespace dualpipe
