#include "dualpipe/trace/name_pattern.h"

#include <vector>

#include "dualpipe/trace/kineto.h"
#include "dualpipe/util/error.h"
#include "dualpipe/util/printable.h"

namespace dualpipe {

namespace {

bool unbounded_at(const std::string& p, std::size_t i) {
  if (p[i] == '*' || p[i] == '+') return true;
  if (p[i] != '{') return false;
  const std::size_t close = p.find('}', i);
  return close != std::string::npos && p[close - 1] == ',';
}

bool quantifier_at(const std::string& p, std::size_t i) {
  return p[i] == '*' || p[i] == '+' || p[i] == '?' || p[i] == '{';
}

// Why `p` may backtrack without bound, or "".
std::string backtracking_risk(const std::string& p) {
  std::vector<bool> open;  // per open group: it holds a quantifier or a '|'
  int unbounded = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\') {  // an escaped character
      ++i;
      continue;
    }
    if (c == '[') {  // a class: its characters are no operators
      std::size_t j = i + 1;
      if (j < p.size() && p[j] == '^') ++j;
      if (j < p.size() && p[j] == ']') ++j;
      while (j < p.size() && p[j] != ']') j += p[j] == '\\' ? 2 : 1;
      i = j;
      continue;
    }
    if (c == '(') {
      open.push_back(false);
      if (i + 1 < p.size() && p[i + 1] == '?') i += 2;  // (?: (?= (?!: the '?' is no quantifier
      continue;
    }
    if (c == ')') {
      if (open.empty()) continue;  // std::regex names the mismatch
      const bool ambiguous = open.back();
      open.pop_back();
      if (!open.empty()) open.back() = open.back() || ambiguous;
      if (ambiguous && i + 1 < p.size() && quantifier_at(p, i + 1) && p[i + 1] != '?')
        return detail::concat("it repeats a group that holds a repetition or an alternative (the group ending at "
                              "character ", i + 1, "), which backtracks exponentially in a name's length");
      continue;
    }
    if ((quantifier_at(p, i) || c == '|') && !open.empty()) open.back() = true;
    if (unbounded_at(p, i) && ++unbounded > kMaxPatternRepetitions)
      return detail::concat("it has more than ", kMaxPatternRepetitions,
                            " unbounded repetition (*, +, {n,}); each multiplies the time of a match by a name's "
                            "length");
  }
  return "";
}

}  // namespace

std::regex compile_name_pattern(const std::string& pattern, const std::string& option) {
  DUALPIPE_REQUIRE(pattern.size() <= kMaxCommunicationPatternLength, option, " has at most ",
                   kMaxCommunicationPatternLength, " characters, got ", pattern.size());
  const std::string risk = backtracking_risk(pattern);
  DUALPIPE_REQUIRE(risk.empty(), option, " '", printable_line(pattern), "' is refused: ", risk);
  try {
    return std::regex(pattern, std::regex::ECMAScript | std::regex::icase | std::regex::optimize);
  } catch (const std::regex_error& e) {
    throw InvalidArgument(
        detail::concat(option, " '", printable_line(pattern), "' is not a regular expression: ", e.what()));
  }
}

}  // namespace dualpipe
