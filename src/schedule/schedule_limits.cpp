#include "dualpipe/schedule_limits.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "dualpipe/error.h"

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

std::int64_t parse_memory_size(const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(begin, &end);
  std::string suffix(end);
  for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double scale = 0;
  if (suffix.empty() || suffix == "B") scale = 1;
  else if (suffix == "K" || suffix == "KB" || suffix == "KIB") scale = 1024.0;
  else if (suffix == "M" || suffix == "MB" || suffix == "MIB") scale = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "GB" || suffix == "GIB") scale = 1024.0 * 1024 * 1024;
  else if (suffix == "T" || suffix == "TB" || suffix == "TIB") scale = 1024.0 * 1024 * 1024 * 1024;
  const double bytes = value * scale;
  DUALPIPE_REQUIRE(end != begin && scale > 0 && std::isfinite(bytes) && bytes >= 1 && bytes <= 9.0e18,
                   "cannot read memory size '", text, "': expected a positive number of bytes with an optional "
                   "K, M, G or T suffix (powers of 1024), as in 4G");
  return static_cast<std::int64_t>(bytes);
}

}  // namespace dualpipe
