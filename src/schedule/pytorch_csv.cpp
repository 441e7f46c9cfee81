#include "dualpipe/pytorch_csv.h"

#include <algorithm>
#include <vector>

#include "dualpipe/error.h"
#include "dualpipe/infer.h"

namespace dualpipe {
namespace {

// PyTorch writes an overlapped pair as "(0F7;7B3)OVERLAP_F_B".
std::string csv_cell(const Action& a) {
  std::string cell = to_string(a);
  if (a.type == ActionType::Overlapped) cell += "OVERLAP_F_B";
  return cell;
}

// Splits one CSV record; cells may be quoted ("..." with "" for a quote), as Python's csv module writes
// them when a cell holds a separator.
std::vector<std::string> split_record(std::string_view line, int line_number) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cells.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cells.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      cells.emplace_back();
    } else if (c != '\r') {
      cells.back() += c;
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
      if (a.is_compute()) row.push_back(csv_cell(a));
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

Schedule parse_pytorch_csv(std::string_view csv) {
  std::vector<std::vector<Action>> actions;
  int line_number = 0;
  while (!csv.empty()) {
    const std::size_t newline = csv.find('\n');
    const std::string_view line = csv.substr(0, newline);
    csv.remove_prefix(newline == std::string_view::npos ? csv.size() : newline + 1);
    ++line_number;
    auto& rank_actions = actions.emplace_back();
    for (const std::string& cell : split_record(line, line_number)) {
      if (cell.empty()) continue;  // an idle step
      try {
        rank_actions.push_back(parse_action(cell));
      } catch (const InvalidArgument& e) {
        throw InvalidArgument(detail::concat("CSV line ", line_number, " (rank ", actions.size() - 1, "): ",
                                             e.what()));
      }
    }
  }
  // A trailing newline leaves no empty rank behind; interior empty rows are ranks with nothing to do.
  while (!actions.empty() && actions.back().empty()) actions.pop_back();
  DUALPIPE_REQUIRE(!actions.empty(), "the CSV holds no actions");
  return schedule_from_actions(std::move(actions));
}

}  // namespace dualpipe
