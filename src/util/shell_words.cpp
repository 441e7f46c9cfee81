#include "dualpipe/util/shell_words.h"

#include <string_view>

namespace dualpipe {

std::string shell_quoted(const std::string& word) {
  const auto plain = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("@%+=:,./_-").find(c) != std::string_view::npos;
  };
  bool needs_quotes = word.empty();
  for (char c : word) needs_quotes = needs_quotes || !plain(c);
  if (!needs_quotes) return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string shell_command(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& word : words) out += (out.empty() ? "" : " ") + shell_quoted(word);
  return out;
}

}  // namespace dualpipe
