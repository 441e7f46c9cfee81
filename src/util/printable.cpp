#include "dualpipe/util/printable.h"

#include <cstdio>

namespace dualpipe {
namespace {

// The length of the valid UTF-8 sequence starting at text[i] (overlong forms and surrogates refused), or 0.
size_t utf8_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the second byte's range
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (size_t k = 2; k < length; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  // C1 controls (U+0080..U+009F) act like controls on some terminals.
  if (lead == 0xC2 && byte(i + 1) <= 0x9F) return 0;
  // The bidirectional embeddings and overrides (U+202A..U+202E: E2 80 AA..AE) and isolates (U+2066..U+2069:
  // E2 81 A6..A9) make a terminal show text in another order than it is.
  if (lead == 0xE2 && ((byte(i + 1) == 0x80 && byte(i + 2) >= 0xAA && byte(i + 2) <= 0xAE) ||
                       (byte(i + 1) == 0x81 && byte(i + 2) >= 0xA6 && byte(i + 2) <= 0xA9)))
    return 0;
  return length;
}

// The length of the character at text[i] that is printed as it is (0: escape its first byte).
size_t kept_length(std::string_view text, size_t i, bool multiline) {
  const unsigned char c = static_cast<unsigned char>(text[i]);
  if (c >= 0x20 && c < 0x7F) return 1;
  if (c == '\n' || c == '\t') return multiline ? 1 : 0;
  return c >= 0x80 ? utf8_length(text, i) : 0;
}

std::string escaped(std::string_view text, bool multiline) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\\') {
      out += "\\\\";
      ++i;
    } else if (const size_t n = kept_length(text, i, multiline); n > 0) {
      out.append(text.substr(i, n));
      i += n;
    } else {
      char code[5];
      std::snprintf(code, sizeof code, "\\x%02X", c);
      out += code;
      ++i;
    }
  }
  return out;
}

}  // namespace

std::string printable(std::string_view text) { return escaped(text, true); }
std::string printable_line(std::string_view text) { return escaped(text, false); }

std::string printable_message(std::string_view text, size_t limit) {
  if (text.size() <= limit) return printable(text);
  return printable(text.substr(0, limit)) + "... (" + std::to_string(text.size() - limit) + " more bytes)";
}

size_t first_unprintable(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t n = kept_length(text, i, false);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

}  // namespace dualpipe
