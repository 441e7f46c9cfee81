#include "dualpipe/sim/plan_file.h"
#include "dualpipe/schedule/text_format.h"
#include "dualpipe/sim/layer_partition.h"

#include "dualpipe/util/error.h"

namespace dualpipe {
namespace {

constexpr std::string_view kPrefix = "# dualpipe plan: ";
constexpr std::string_view kCosts = ", costs ";
constexpr size_t kMaxPlanNameLength = 200;

}  // namespace

std::string format_plan_header(const PlanFileHeader& header) {
  return std::string(kPrefix) + header.name + std::string(kCosts) + header.costs.to_string() + "\n";
}

std::string format_plan_file(const PlanCandidate& best) {
  std::string head = format_plan_header({best.name, best.costs});
  if (!best.layers_per_stage.empty()) head += "# layers per stage: " + format_cut(best.layers_per_stage) + "\n";
  return head + format_text(best.schedule);
}

std::optional<PlanFileHeader> read_plan_header(std::string_view text, const std::string& path) {
  // The header is the first line; a file without it is an ordinary schedule file.
  if (text.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  std::string_view line = text.substr(kPrefix.size());
  line = line.substr(0, line.find('\n'));
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const size_t costs_at = line.rfind(kCosts);
  DUALPIPE_REQUIRE(costs_at != std::string_view::npos, path, ": its first line starts like a plan header ('",
                   kPrefix, "') but has no '", kCosts.substr(2), "' part");
  PlanFileHeader header;
  header.name = std::string(line.substr(0, costs_at));
  // The name is printed back in titles and tables: bounded, and nothing a terminal would take as a command.
  DUALPIPE_REQUIRE(header.name.size() <= kMaxPlanNameLength, path, ": the plan header's name has ", header.name.size(),
                   " characters; at most ", kMaxPlanNameLength);
  for (const char c : header.name)
    DUALPIPE_REQUIRE(static_cast<unsigned char>(c) >= 0x20 && c != 0x7F, path,
                     ": the plan header's name holds a control character (byte ",
                     static_cast<int>(static_cast<unsigned char>(c)), "); names are printable text");
  try {
    header.costs = CostModel::parse(line.substr(costs_at + kCosts.size()));
    header.costs.check();
  } catch (const Error& e) {
    throw InvalidArgument(detail::concat(path, ": the plan header's costs: ", e.what()));
  }
  return header;
}

}  // namespace dualpipe
