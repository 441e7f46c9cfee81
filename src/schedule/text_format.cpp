#include "dualpipe/text_format.h"

#include <string>
#include <vector>

#include "dualpipe/error.h"
#include "dualpipe/infer.h"

namespace dualpipe {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string format_text(const Schedule& schedule) {
  std::string out;
  for (std::size_t r = 0; r < schedule.actions.size(); ++r) {
    out += "rank " + std::to_string(r) + ":";
    for (const Action& a : schedule.actions[r]) {
      out += ' ';
      out += to_string(a);
    }
    out += '\n';
  }
  return out;
}

Schedule parse_text(std::string_view text) {
  std::vector<std::vector<Action>> actions;
  int line_number = 0;
  while (!text.empty()) {
    const std::size_t newline = text.find('\n');
    const std::string_view raw = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    ++line_number;
    const std::string_view line = trim(raw);
    if (line.empty() || line.front() == '#') continue;

    const std::size_t colon = line.find(':');
    const std::string_view head = line.substr(0, colon);
    const std::string expected = "rank " + std::to_string(actions.size());
    if (colon == std::string_view::npos || trim(head) != expected) {
      throw InvalidArgument(detail::concat("line ", line_number, ": expected '", expected,
                                           ": <actions>' (ranks in order from 0), got '", line, "'"));
    }
    std::vector<Action>& rank_actions = actions.emplace_back();
    std::string_view rest = line.substr(colon + 1);
    while (!(rest = trim(rest)).empty()) {
      const std::size_t space = rest.find_first_of(" \t");
      const std::string_view token = rest.substr(0, space);
      try {
        rank_actions.push_back(parse_action(token));
      } catch (const InvalidArgument& e) {
        throw InvalidArgument(detail::concat("line ", line_number, ": ", e.what()));
      }
      rest.remove_prefix(token.size());
    }
  }
  DUALPIPE_REQUIRE(!actions.empty(), "the schedule text holds no 'rank N:' lines");
  return schedule_from_actions(std::move(actions));
}

}  // namespace dualpipe
