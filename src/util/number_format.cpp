#include "dualpipe/util/number_format.h"

#include <cstdarg>
#include <cstdio>

namespace dualpipe {

std::string formatted(const char* spec, ...) {
  va_list args, again;
  va_start(args, spec);
  va_copy(again, args);
  const int length = std::vsnprintf(nullptr, 0, spec, args);
  va_end(args);
  std::string text(length > 0 ? size_t(length) : 0, '\0');
  if (length > 0) std::vsnprintf(text.data(), text.size() + 1, spec, again);
  va_end(again);
  return text;
}

std::string fixed(double value, int decimals) { return formatted("%.*f", decimals, value); }

std::string shortest_fixed(double value, int decimals) {
  std::string s = fixed(value, decimals);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s == "-0" ? "0" : s;
}

}  // namespace dualpipe
