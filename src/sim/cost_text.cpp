#include "dualpipe/sim/cost_model.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "dualpipe/util/error.h"
#include "dualpipe/util/printable.h"

// The costs as text (CostModel::parse and to_string, --rank-speed) and their rules (check): cost_model.h. How long
// an action takes under them: cost_model.cpp.
namespace dualpipe {
namespace {

constexpr const char* kKnownKeys =
    "F, B, W, I, FB, comm, gap, a2a, a2a_latency, layers, pair, unshard, reduce, act_bytes, w_mem, recompute, "
    "input_mem, scale, act_scale";

double parse_number(std::string_view key, std::string_view text) {
  const std::string s(text);
  char* end = nullptr;
  // strtod skips leading blanks and reads "inf", "nan" and hex floats: only plain finite decimals are costs.
  const bool plain = !s.empty() && !std::isspace(static_cast<unsigned char>(s.front())) &&
                     s.find_first_of("xXnN") == std::string::npos;
  const double value = plain ? std::strtod(s.c_str(), &end) : 0.0;
  DUALPIPE_REQUIRE(plain && end == s.c_str() + s.size(), "cost ", key, ": '", text, "' is not a number");
  DUALPIPE_REQUIRE(std::isfinite(value), "cost ", key, ": '", text,
                   "' is not a finite number (it overflows a double); give costs in a larger unit");
  return value;
}

int parse_layers(std::string_view text) {
  const double value = parse_number("layers", text);
  DUALPIPE_REQUIRE(value == std::floor(value) && value >= 1 && value <= 4096,
                   "cost layers (MoE layers of a slice) must be a whole number between 1 and 4096, got layers=", text);
  return static_cast<int>(value);
}

}  // namespace

const char* pair_mode_name(PairMode mode) {
  return mode == PairMode::Threads ? "threads" : mode == PairMode::Off ? "off" : "phases";
}

namespace {

PairMode parse_pair(std::string_view text) {
  DUALPIPE_REQUIRE(text == "phases" || text == "threads" || text == "off", "cost pair (how an overlapped pair runs "
                   "its halves) must be phases, threads or off, got pair=", text);
  return text == "threads" ? PairMode::Threads : text == "off" ? PairMode::Off : PairMode::Phases;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Costs in text: enough digits to read back the same double in practice, "1e+308" for the huge ones.
std::string number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.10g", value);
  return buffer;
}

std::vector<double> parse_list(std::string_view key, std::string_view value) {
  std::vector<double> out;
  DUALPIPE_REQUIRE(!value.empty(), "cost ", key, ": empty list; write ", key, "=1:1:2, one value per stage");
  while (true) {
    const std::size_t colon = value.find(':');
    const std::string_view item = value.substr(0, colon);
    DUALPIPE_REQUIRE(!item.empty(), "cost ", key, ": empty value at position ", out.size() + 1,
                     " of the list; write ", key, "=1:1:2, one value per stage");
    out.push_back(parse_number(key, item));
    if (colon == std::string_view::npos) break;
    value.remove_prefix(colon + 1);
  }
  return out;
}

// "1.5": one value for every stage; "2:1:1:1.5": one per stage, the mean kept as the uniform value.
void parse_cost(std::string_view key, std::string_view value, double& uniform, std::vector<double>& per_stage) {
  if (value.find(':') == std::string_view::npos) {
    uniform = parse_number(key, value);
    return;
  }
  per_stage = parse_list(key, value);
  double sum = 0;
  for (double v : per_stage) sum += v;
  uniform = sum / static_cast<double>(per_stage.size());
}

}  // namespace

CostModel CostModel::parse(std::string_view spec) {
  CostModel costs;
  std::set<std::string> seen;
  const std::string_view whole = spec;
  int position = 0;
  while (!spec.empty()) {
    const std::size_t comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    ++position;
    DUALPIPE_REQUIRE(!item.empty(), "cost item ", position, " of '", whole,
                     "' is empty; write KEY=VALUE items separated by single commas");
    DUALPIPE_REQUIRE(comma == std::string_view::npos || comma + 1 < spec.size(), "cost list '", whole,
                     "' ends with a comma; write KEY=VALUE items separated by single commas");
    spec.remove_prefix(comma == std::string_view::npos ? spec.size() : comma + 1);
    const std::size_t eq = item.find('=');
    DUALPIPE_REQUIRE(eq != std::string_view::npos, "cost item '", item, "' must be KEY=VALUE, with KEY one of ",
                     kKnownKeys);
    const std::string key = lower(item.substr(0, eq));
    const std::string_view value = item.substr(eq + 1);
    DUALPIPE_REQUIRE(seen.insert(key).second, "cost key '", item.substr(0, eq), "' is given twice in '", whole,
                     "'; give each key once");
    if (key == "f") parse_cost("F", value, costs.forward, costs.stage_forward);
    else if (key == "b") parse_cost("B", value, costs.backward, costs.stage_backward);
    else if (key == "w") parse_cost("W", value, costs.weight, costs.stage_weight);
    else if (key == "i") parse_cost("I", value, costs.input.emplace(), costs.stage_input);
    else if (key == "act_scale") costs.stage_activation = parse_list("act_scale", value);
    else if (key == "fb") costs.overlapped = parse_number("FB", value);
    else if (key == "comm") costs.comm = parse_number("comm", value);
    else if (key == "gap") costs.gap = parse_number("gap", value);
    else if (key == "a2a") costs.all_to_all = parse_number("a2a", value);
    else if (key == "a2a_latency") costs.all_to_all_latency = parse_number("a2a_latency", value);
    else if (key == "layers") costs.layers = parse_layers(value);
    else if (key == "pair") costs.pair = parse_pair(value);
    else if (key == "unshard") costs.unshard = parse_number("unshard", value);
    else if (key == "reduce") costs.reduce = parse_number("reduce", value);
    else if (key == "act_bytes") costs.activation_bytes = parse_number("act_bytes", value);
    else if (key == "w_mem") costs.w_mem = parse_number("w_mem", value);
    else if (key == "input_mem") costs.input_mem = parse_number("input_mem", value);
    else if (key == "recompute") {
      DUALPIPE_REQUIRE(value == "0" || value == "1", "cost recompute must be 0 or 1, got recompute=", value);
      costs.recompute = value == "1";
    } else if (key == "scale") {
      costs.stage_scale = parse_list("scale", value);
    } else {
      throw InvalidArgument(
          detail::concat("unknown cost key '", item.substr(0, eq), "' (known keys: ", kKnownKeys, ")"));
    }
  }
  // W was not given: its default of 1 is the user's only through the defaults, so say so.
  DUALPIPE_REQUIRE(seen.count("w") || costs.weight <= costs.backward, "cost W (not given: ", costs.weight,
                   " by default) is part of B, so W <= B; with B=", costs.backward, " in '", whole,
                   "', give W as well");
  costs.check();
  return costs;
}

void CostModel::check() const {
  // parse() only reads finite numbers, but a CostModel built in code (or fitted from a trace) could hold inf.
  for (const double value : {forward, backward, weight, input.value_or(0), overlapped.value_or(1.0), comm, gap,
                             all_to_all, all_to_all_latency.value_or(0), unshard, reduce, activation_bytes, w_mem,
                             input_mem})
    DUALPIPE_REQUIRE(std::isfinite(value), "costs must be finite numbers, got ", to_string());
  for (const double value : stage_scale)
    DUALPIPE_REQUIRE(std::isfinite(value), "stage scales must be finite numbers, got ", to_string());
  DUALPIPE_REQUIRE(forward > 0, "cost F must be positive, got F=", forward);
  DUALPIPE_REQUIRE(backward > 0, "cost B must be positive, got B=", backward);
  DUALPIPE_REQUIRE(weight >= 0 && weight <= backward, "cost W is part of B, so 0 <= W <= B, got W=", weight,
                   " with B=", backward);
  DUALPIPE_REQUIRE(input.value_or(0) >= 0, "cost I must not be negative, got I=", input.value_or(0));
  DUALPIPE_REQUIRE(input || stage_input.empty(), "cost I per stage needs the uniform I beside it (CostModel::input)");
  DUALPIPE_REQUIRE(!overlapped || *overlapped > 0, "cost FB must be positive, got FB=", overlapped.value_or(0));
  DUALPIPE_REQUIRE(comm >= 0, "cost comm must not be negative, got comm=", comm);
  DUALPIPE_REQUIRE(gap >= 0, "cost gap must not be negative, got gap=", gap);
  DUALPIPE_REQUIRE(all_to_all >= 0, "cost a2a must not be negative, got a2a=", all_to_all);
  DUALPIPE_REQUIRE(layers >= 1 && layers <= 4096, "cost layers (MoE layers of a slice) must be between 1 and 4096, "
                   "got layers=", layers);
  if (all_to_all_latency) {
    const double exchange = all_to_all / (2 * layers);
    // (A tolerance for costs printed with 10 digits and read back.)
    DUALPIPE_REQUIRE(*all_to_all_latency >= 0 && *all_to_all_latency <= exchange * (1 + 1e-9),
                     "cost a2a_latency is part of each exchange, so 0 <= a2a_latency <= a2a / (2 x layers) = ",
                     exchange, ", got a2a_latency=", *all_to_all_latency);
  }
  DUALPIPE_REQUIRE(unshard >= 0, "cost unshard must not be negative, got unshard=", unshard);
  DUALPIPE_REQUIRE(reduce >= 0, "cost reduce must not be negative, got reduce=", reduce);
  DUALPIPE_REQUIRE(activation_bytes >= 0, "cost act_bytes must not be negative, got act_bytes=", activation_bytes);
  DUALPIPE_REQUIRE(w_mem >= 0 && w_mem <= 1, "cost w_mem is a share of a stage's activation, so 0 <= w_mem <= 1, "
                   "got w_mem=", w_mem);
  DUALPIPE_REQUIRE(input_mem >= 0 && input_mem <= 1, "cost input_mem is a share of a stage's activation, so "
                   "0 <= input_mem <= 1, got input_mem=", input_mem);
  for (std::size_t s = 0; s < stage_scale.size(); ++s) {
    DUALPIPE_REQUIRE(stage_scale[s] > 0, "stage scale must be positive, got ", stage_scale[s], " for stage ", s);
  }
  for (std::size_t r = 0; r < rank_speed.size(); ++r)
    DUALPIPE_REQUIRE(std::isfinite(rank_speed[r]) && rank_speed[r] > 0, "--rank-speed of rank ", r,
                     " must be a positive number, got ", rank_speed[r]);
  // Per-stage lists: one length for all, positive, finite, W part of B on every stage.
  std::size_t n = 0;
  const std::pair<const char*, const std::vector<double>*> lists[] = {
      {"scale", &stage_scale}, {"F", &stage_forward}, {"B", &stage_backward}, {"W", &stage_weight},
      {"I", &stage_input}, {"act_scale", &stage_activation}};
  for (const auto& [name, list] : lists) {
    if (list->empty()) continue;
    DUALPIPE_REQUIRE(n == 0 || list->size() == n, "per-stage lists must have the same length, got ", list->size(),
                     " values for ", name, " and ", n, " for another");
    n = list->size();
    for (std::size_t s = 0; s < list->size(); ++s) {
      const double v = (*list)[s];
      const bool may_be_zero = std::string(name) == "W" || std::string(name) == "I";
      DUALPIPE_REQUIRE(std::isfinite(v) && (v > 0 || (v == 0 && may_be_zero)), "cost ", name,
                       " for stage ", s, " must be a positive finite number, got ", v);
    }
  }
  for (int s = 0; s < static_cast<int>(n); ++s) {
    DUALPIPE_REQUIRE(weight_of(s) <= backward_of(s) * (1 + 1e-12), "cost W is part of B, so W <= B on every stage, got W=",
                     weight_of(s), " with B=", backward_of(s), " for stage ", s);
  }
  // Each value finite, but the pair's default F+B (or a recomputing backward's B+F) could overflow.
  double longest = 0;
  const int stages = static_cast<int>(std::max({stage_scale.size(), stage_forward.size(), stage_backward.size()}));
  for (int s = 0; s < std::max(stages, 1); ++s)
    longest = std::max(longest, (2 * forward_of(s) + backward_of(s) + 2 * all_to_all_of(s)) +
                                    (overlapped.value_or(0) + unshard + reduce) * scale(s));
  DUALPIPE_REQUIRE(std::isfinite(longest), "costs ", to_string(),
                   " are too large to simulate: F+B overflows a double; give them in a larger time unit");
}

void CostModel::check_stages(int num_stages) const {
  check();
  for (const auto& [name, list] : {std::pair<const char*, const std::vector<double>*>{"scale", &stage_scale},
                                   {"F", &stage_forward}, {"B", &stage_backward}, {"W", &stage_weight},
                                   {"I", &stage_input}, {"act_scale", &stage_activation}}) {
    DUALPIPE_REQUIRE(list->empty() || static_cast<int>(list->size()) == num_stages, "cost ", name, " has ",
                     list->size(), " values for a schedule with ", num_stages, " stages; give one per stage");
  }
}

std::vector<double> parse_rank_speed(std::string_view text) {
  std::vector<double> speeds;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t comma = std::min(text.find(',', begin), text.size());
    const std::string item(text.substr(begin, comma - begin));
    char* end = nullptr;
    const double speed = item.empty() ? 0 : std::strtod(item.c_str(), &end);
    // 1/1000 to 1000: a speed of 1e-308 made every cost overflow the simulated step, past what any rank can be.
    DUALPIPE_REQUIRE(!item.empty() && end && *end == '\0' && std::isfinite(speed) && speed >= 0.001 && speed <= 1000,
                     "--rank-speed '", printable_message(text, 100), "': value ", speeds.size() + 1, " ('",
                     printable_message(item, 40), "') must be a number from 0.001 to 1000 (a rank's speed against the "
                     "costs: 1 as costed, 0.67 takes 1.5 times as long)");
    DUALPIPE_REQUIRE(speeds.size() < 4096, "--rank-speed has more than 4096 values (one per rank)");
    speeds.push_back(speed);
    begin = comma + 1;
  }
  return speeds;
}

void CostModel::check_ranks(int num_ranks) const {
  DUALPIPE_REQUIRE(rank_speed.empty() || static_cast<int>(rank_speed.size()) == num_ranks, "--rank-speed has ",
                   rank_speed.size(), " values for a schedule of ", num_ranks, " ranks; give one per rank");
}

std::string CostModel::to_string() const {
  const auto list_or = [](const std::vector<double>& list, double uniform) {
    if (list.empty()) return number(uniform);
    std::string out;
    for (std::size_t s = 0; s < list.size(); ++s) out += (s ? ":" : "") + number(list[s]);
    return out;
  };
  std::string out = "F=" + list_or(stage_forward, forward) + ",B=" + list_or(stage_backward, backward) +
                    ",W=" + list_or(stage_weight, weight) + (input ? ",I=" + list_or(stage_input, *input) : "") +
                    ",FB=" + number(overlapped_pair()) +
                    ",comm=" + number(comm);
  if (gap > 0) out += ",gap=" + number(gap);
  if (all_to_all > 0) out += ",a2a=" + number(all_to_all);
  if (all_to_all_latency) out += ",a2a_latency=" + number(*all_to_all_latency);
  if (layers != 1) out += ",layers=" + std::to_string(layers);
  if (pair != PairMode::Phases) out += std::string(",pair=") + pair_mode_name(pair);
  if (unshard > 0) out += ",unshard=" + number(unshard);
  if (reduce > 0) out += ",reduce=" + number(reduce);
  if (activation_bytes > 0) out += ",act_bytes=" + number(activation_bytes);
  if (w_mem != 1) out += ",w_mem=" + number(w_mem);
  if (recompute) out += ",recompute=1";
  if (input_mem != CostModel{}.input_mem) out += ",input_mem=" + number(input_mem);
  if (!stage_scale.empty()) out += ",scale=" + list_or(stage_scale, 1);
  if (!stage_activation.empty()) out += ",act_scale=" + list_or(stage_activation, 1);
  return out;
}

}  // namespace dualpipe
