#include "dualpipe/schedule/pytorch_csv.h"

#include <algorithm>
#include <vector>

#include "dualpipe/schedule/infer.h"
#include "dualpipe/util/byte_size.h"
#include "dualpipe/util/error.h"
#include "schedule/line_reader.h"

namespace dualpipe {
namespace {

// PyTorch writes an overlapped pair as "(0F7;7B3)OVERLAP_F_B".
std::string csv_cell(const Action& a) {
  std::string cell = to_string(a);
  if (a.type == ActionType::Overlapped) cell += "OVERLAP_F_B";
  return cell;
}

struct Cell {
  std::string text;
  int column = 1;  // 1-based, of the cell's first character
};

// Splits one CSV record; cells may be quoted ("..." with "" for a quote), as Python's csv module writes
// them when a cell holds a separator.
std::vector<Cell> split_record(std::string_view line, int line_number) {
  std::vector<Cell> cells(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cells.back().text += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cells.back().text += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      cells.push_back(Cell{{}, static_cast<int>(i) + 2});
    } else if (c != '\r') {
      cells.back().text += c;
    }
  }
  DUALPIPE_REQUIRE(!quoted, "CSV line ", line_number, ": unterminated quoted cell");
  return cells;
}

}  // namespace

std::string format_pytorch_csv(const Schedule& schedule) {
  std::vector<std::vector<std::string>> rows;
  std::size_t width = 0;
  for (const auto& rank_actions : schedule.actions) {
    auto& row = rows.emplace_back();
    for (const Action& a : rank_actions) {
      if (!a.is_communication()) row.push_back(csv_cell(a));
    }
    width = std::max(width, row.size());
  }
  std::string out;
  for (auto& row : rows) {
    row.resize(width);
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (i) out += ',';
      out += row[i];
    }
    out += "\r\n";  // Python's csv.writer line terminator
  }
  return out;
}

void require_one_rank_per_stage(const Schedule& schedule) {
  for (int stage = 0; stage < schedule.num_stages; ++stage) {
    const std::vector<int> ranks = schedule.placement.ranks_holding(stage);
    DUALPIPE_REQUIRE(ranks.size() == 1, schedule.kind, " places stage ", stage, " on ranks ", ranks[0], " and ",
                     ranks[1], " (a two-direction placement, two copies of every stage); PyTorch's pipelining "
                     "runs every stage on one rank, so it cannot express this schedule: use its one-direction "
                     "half, dualpipev, or another kind");
  }
}

Schedule parse_pytorch_csv(std::string_view csv, const ScheduleReadLimits& limits) {
  DUALPIPE_REQUIRE(csv.size() <= limits.max_bytes, "the CSV is ", csv.size(), " bytes, above the limit of ",
                   limits.max_bytes, " (", describe_bytes(limits.max_bytes), ")");
  std::vector<std::vector<Action>> actions;
  std::vector<std::vector<int>> column_of;  // [rank][action]
  std::size_t total = 0;
  int line_number = 0;
  while (!csv.empty()) {
    const std::string_view line = next_line(csv, line_number, limits.max_line_bytes, "CSV line");
    if (line.find_first_not_of('\r') == std::string_view::npos) {
      // Only the end of the file may be blank: a blank row inside would silently become a rank with no actions.
      DUALPIPE_REQUIRE(csv.find_first_not_of("\r\n") == std::string_view::npos, "CSV line ", line_number,
                       " is blank: every row is a rank (an idle rank is a row of empty cells, ',,')");
      break;
    }
    DUALPIPE_REQUIRE(static_cast<int>(actions.size()) < limits.max_ranks, "CSV line ", line_number, ": rank ",
                     actions.size(), " is one rank more than the limit of ", limits.max_ranks, " ranks");
    auto& rank_actions = actions.emplace_back();
    auto& columns = column_of.emplace_back();
    for (const Cell& cell : split_record(line, line_number)) {
      if (cell.text.empty()) continue;  // an idle step
      DUALPIPE_REQUIRE(++total <= limits.max_actions, "CSV line ", line_number, ", column ", cell.column,
                       ": more than the limit of ", limits.max_actions, " actions");
      try {
        rank_actions.push_back(parse_action(cell.text));
      } catch (const InvalidArgument& e) {
        throw InvalidArgument(detail::concat("CSV line ", line_number, ", column ", cell.column, " (rank ",
                                             actions.size() - 1, "): ", e.what()));
      }
      columns.push_back(cell.column);
    }
  }
  // Rows of empty cells at the end are padding, not ranks.
  while (!actions.empty() && actions.back().empty()) actions.pop_back();
  DUALPIPE_REQUIRE(!actions.empty(), "the CSV holds no actions");
  check_action_indices(actions, [&](std::size_t rank, std::size_t index) {
    return detail::concat("CSV line ", rank + 1, ", column ", column_of[rank][index]);
  }, limits.contiguous_indices);
  return schedule_from_actions(std::move(actions));
}

}  // namespace dualpipe
