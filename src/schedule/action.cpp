#include "dualpipe/schedule/action.h"

#include <array>
#include <cctype>

#include "dualpipe/util/error.h"

namespace dualpipe {
namespace {

constexpr std::array<std::string_view, 12> kTypeNames = {
    "F",      "B",      "I",      "W",       "OVERLAP_F_B", "SEND_F",
    "RECV_F", "SEND_B", "RECV_B", "UNSHARD", "RESHARD",     "REDUCE_GRAD"};

// Reads a non-negative decimal number at text[pos...], advancing pos. Returns -1 when there is none.
int read_number(std::string_view text, std::size_t& pos) {
  const std::size_t begin = pos;
  long value = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
    value = value * 10 + (text[pos] - '0');
    if (value > 1'000'000'000) return -1;
    ++pos;
  }
  return pos == begin ? -1 : static_cast<int>(value);
}

[[noreturn]] void bad_action(std::string_view text, std::string_view why) {
  throw InvalidArgument(detail::concat("cannot parse action '", text, "': ", why,
                                       " (expected forms: 0F1, 0B1, 0I1, 0W1, (0F1;3B0), 0SEND_F1, 0RECV_B1, "
                                       "0UNSHARD, 0RESHARD, 0REDUCE_GRAD)"));
}

// Parses "<stage><TYPE><microbatch>" for every type but the overlapped pair ("<stage><TYPE>" for the data-parallel
// ones, as PyTorch writes them). `pair` is the whole
// "(sFm;tBn)" token when `text` is one of its halves, so errors name what the user wrote.
Action parse_simple(std::string_view text, std::string_view pair = {}) {
  auto fail = [&](std::string_view why) {
    if (pair.empty()) bad_action(text, why);
    bad_action(pair, detail::concat("its half '", text, "': ", why));
  };
  std::size_t pos = 0;
  const int stage = read_number(text, pos);
  if (stage < 0) fail("it must start with a stage number");
  std::size_t type_end = pos;
  while (type_end < text.size() && !std::isdigit(static_cast<unsigned char>(text[type_end]))) ++type_end;
  const std::string_view name = text.substr(pos, type_end - pos);
  int type_index = -1;
  for (std::size_t i = 0; i < kTypeNames.size(); ++i) {
    if (kTypeNames[i] == name && i != static_cast<std::size_t>(ActionType::Overlapped)) {
      type_index = static_cast<int>(i);
    }
  }
  if (type_index < 0) fail(detail::concat("unknown action type '", name, "'"));
  const auto type = static_cast<ActionType>(type_index);
  if (Action{type}.is_data_parallel()) {
    if (type_end != text.size())
      fail(detail::concat(name, " belongs to a stage, not a micro-batch: write ", stage, name));
    return Action::data_parallel(type, stage);
  }
  pos = type_end;
  const int microbatch = read_number(text, pos);
  if (microbatch < 0) fail("it must end with a micro-batch number");
  if (pos != text.size()) fail("unexpected characters after the micro-batch number");
  return Action{type, stage, microbatch};
}

}  // namespace

std::string_view type_name(ActionType type) { return kTypeNames[static_cast<std::size_t>(type)]; }

std::string profiler_region(const Action& action) {
  static constexpr std::array<const char*, 5> kinds = {"forward", "backward", "backward_input", "weight",
                                                       "forward_backward"};
  DUALPIPE_REQUIRE(action.is_compute(), "profiler_region: ", to_string(action), " is not a compute action");
  return std::string(kinds[static_cast<std::size_t>(action.type)]) + " stage " + std::to_string(action.stage);
}

std::string to_string(const Action& action) {
  if (action.type == ActionType::Overlapped) {
    return detail::concat('(', action.stage, 'F', action.microbatch, ';', action.bwd_stage, 'B',
                          action.bwd_microbatch, ')');
  }
  if (action.is_data_parallel()) return detail::concat(action.stage, type_name(action.type));
  return detail::concat(action.stage, type_name(action.type), action.microbatch);
}

Action parse_action(std::string_view text) {
  if (text.empty()) bad_action(text, "it is empty");
  if (text.front() != '(') return parse_simple(text);

  // "(sFm;tBn)", optionally followed by PyTorch's "OVERLAP_F_B" suffix.
  std::string_view body = text;
  constexpr std::string_view kSuffix = "OVERLAP_F_B";
  if (body.size() > kSuffix.size() && body.substr(body.size() - kSuffix.size()) == kSuffix) {
    body.remove_suffix(kSuffix.size());
  }
  if (body.back() != ')') bad_action(text, "an overlapped pair must end with ')'");
  body = body.substr(1, body.size() - 2);
  const std::size_t semicolon = body.find(';');
  if (semicolon == std::string_view::npos) bad_action(text, "an overlapped pair needs ';' between its halves");
  const Action fwd = parse_simple(body.substr(0, semicolon), text);
  const Action bwd = parse_simple(body.substr(semicolon + 1), text);
  if (fwd.type != ActionType::Forward || bwd.type != ActionType::Backward) {
    bad_action(text, "an overlapped pair is a forward then a full backward, as in (0F3;3B5)");
  }
  return Action::overlapped(fwd.stage, fwd.microbatch, bwd.stage, bwd.microbatch);
}

}  // namespace dualpipe
