// Number and markup helpers shared by the picture writers (internal to src/viz).
#pragma once

#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

namespace dualpipe::viz {

// The fonts of every picture: the first one a viewer has wins.
constexpr const char* kFontFamily = "DejaVu Sans, Liberation Sans, Arial, Helvetica, sans-serif";

// The round step (1, 2 or 5 times a power of ten) at or just above `raw`, for axis ticks.
inline double round_step(double raw) {
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * power >= raw * (1 - 1e-9)) return m * power;
  return 10 * power;
}

// Exact enough to read back (data attributes): 10 significant digits.
inline std::string exact(double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", value);
  return buf;
}

// Escapes text for XML element content and attribute values alike.
inline std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace dualpipe::viz
