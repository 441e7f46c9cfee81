#include "dualpipe/schedule/text_format.h"

#include <string>
#include <vector>

#include "dualpipe/schedule/infer.h"
#include "dualpipe/util/byte_size.h"
#include "dualpipe/util/error.h"
#include "schedule/line_reader.h"

namespace dualpipe {
namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
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

Schedule parse_text(std::string_view text, const ScheduleReadLimits& limits) {
  DUALPIPE_REQUIRE(text.size() <= limits.max_bytes, "the schedule text is ", text.size(),
                   " bytes, above the limit of ", limits.max_bytes, " (", describe_bytes(limits.max_bytes), ")");
  std::vector<std::vector<Action>> actions;
  std::vector<int> line_of_rank;
  std::vector<std::vector<int>> column_of;  // [rank][action], 1-based
  std::size_t total = 0;
  int line_number = 0;
  while (!text.empty()) {
    const std::string_view raw = next_line(text, line_number, limits.max_line_bytes, "line");
    const std::string_view line = trim(raw);
    if (line.empty() || line.front() == '#') continue;

    const std::size_t colon = line.find(':');
    const std::string_view head = line.substr(0, colon);
    const std::string expected = "rank " + std::to_string(actions.size());
    if (colon == std::string_view::npos || trim(head) != expected) {
      std::string shown(line.substr(0, 60));
      if (line.size() > 60) shown += "...";
      throw InvalidArgument(detail::concat("line ", line_number, ": expected '", expected,
                                           ": <actions>' (ranks in order from 0), got '", shown, "'"));
    }
    DUALPIPE_REQUIRE(static_cast<int>(actions.size()) < limits.max_ranks, "line ", line_number, ": rank ",
                     actions.size(), " is one rank more than the limit of ", limits.max_ranks, " ranks");
    std::vector<Action>& rank_actions = actions.emplace_back();
    line_of_rank.push_back(line_number);
    std::vector<int>& columns = column_of.emplace_back();
    std::string_view rest = raw.substr(static_cast<std::size_t>(line.data() - raw.data()) + colon + 1);
    while (true) {
      while (!rest.empty() && is_blank(rest.front())) rest.remove_prefix(1);
      if (rest.empty()) break;
      const std::size_t space = rest.find_first_of(" \t\r");
      const std::string_view token = rest.substr(0, space);
      const int column = static_cast<int>(token.data() - raw.data()) + 1;
      DUALPIPE_REQUIRE(++total <= limits.max_actions, "line ", line_number, ", column ", column,
                       ": more than the limit of ", limits.max_actions, " actions");
      try {
        rank_actions.push_back(parse_action(token));
      } catch (const InvalidArgument& e) {
        throw InvalidArgument(detail::concat("line ", line_number, ", column ", column, ": ", e.what()));
      }
      columns.push_back(column);
      rest.remove_prefix(token.size());
    }
  }
  DUALPIPE_REQUIRE(!actions.empty(), "the schedule text holds no 'rank N:' lines");
  check_action_indices(actions, [&](std::size_t rank, std::size_t index) {
    return detail::concat("line ", line_of_rank[rank], ", column ", column_of[rank][index]);
  }, limits.contiguous_indices);
  return schedule_from_actions(std::move(actions));
}

}  // namespace dualpipe
