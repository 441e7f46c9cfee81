#include "dualpipe/cost_model.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

#include "dualpipe/error.h"

namespace dualpipe {
namespace {

double parse_number(std::string_view key, std::string_view text) {
  const std::string s(text);
  char* end = nullptr;
  const double value = std::strtod(s.c_str(), &end);
  DUALPIPE_REQUIRE(!s.empty() && end == s.c_str() + s.size() && std::isfinite(value), "cost ", key,
                   ": '", text, "' is not a number");
  return value;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

double CostModel::scale(int stage) const {
  return stage >= 0 && stage < static_cast<int>(stage_scale.size()) ? stage_scale[stage] : 1.0;
}

double CostModel::duration(const Action& a) const {
  const double k = scale(a.stage);
  switch (a.type) {
    case ActionType::Forward: return forward * k;
    case ActionType::Backward: return backward * k;
    case ActionType::BackwardInput: return (backward - weight) * k;
    case ActionType::BackwardWeight: return weight * k;
    case ActionType::Overlapped: {
      const double separate = forward * k + backward * scale(a.bwd_stage);
      // FB is given for a pair of uniform stages; uneven stages scale it like the separate halves.
      return overlapped ? *overlapped * separate / (forward + backward) : separate;
    }
    default: return 0.0;
  }
}

CostModel CostModel::parse(std::string_view spec) {
  CostModel costs;
  while (!spec.empty()) {
    const std::size_t comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    spec.remove_prefix(comma == std::string_view::npos ? spec.size() : comma + 1);
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    DUALPIPE_REQUIRE(eq != std::string_view::npos, "cost item '", item,
                     "' must be KEY=VALUE, with KEY one of F, B, W, FB, comm, act_bytes, scale");
    const std::string key = lower(item.substr(0, eq));
    const std::string_view value = item.substr(eq + 1);
    if (key == "f") costs.forward = parse_number("F", value);
    else if (key == "b") costs.backward = parse_number("B", value);
    else if (key == "w") costs.weight = parse_number("W", value);
    else if (key == "fb") costs.overlapped = parse_number("FB", value);
    else if (key == "comm") costs.comm = parse_number("comm", value);
    else if (key == "act_bytes") costs.activation_bytes = parse_number("act_bytes", value);
    else if (key == "scale") {
      std::string_view rest = value;
      while (!rest.empty()) {
        const std::size_t colon = rest.find(':');
        costs.stage_scale.push_back(parse_number("scale", rest.substr(0, colon)));
        rest.remove_prefix(colon == std::string_view::npos ? rest.size() : colon + 1);
      }
    } else {
      throw InvalidArgument(detail::concat("unknown cost key '", item.substr(0, eq),
                                           "' (known keys: F, B, W, FB, comm, act_bytes, scale)"));
    }
  }
  costs.check();
  return costs;
}

void CostModel::check() const {
  // parse() only reads finite numbers, but a CostModel built in code (or fitted from a trace) could hold inf.
  for (const double value : {forward, backward, weight, overlapped.value_or(1.0), comm, activation_bytes})
    DUALPIPE_REQUIRE(std::isfinite(value), "costs must be finite numbers, got ", to_string());
  for (const double value : stage_scale)
    DUALPIPE_REQUIRE(std::isfinite(value), "stage scales must be finite numbers, got ", to_string());
  DUALPIPE_REQUIRE(forward > 0, "cost F must be positive, got F=", forward);
  DUALPIPE_REQUIRE(backward > 0, "cost B must be positive, got B=", backward);
  DUALPIPE_REQUIRE(weight >= 0 && weight <= backward, "cost W is part of B, so 0 <= W <= B, got W=", weight,
                   " with B=", backward);
  DUALPIPE_REQUIRE(!overlapped || *overlapped > 0, "cost FB must be positive, got FB=", overlapped.value_or(0));
  DUALPIPE_REQUIRE(comm >= 0, "cost comm must not be negative, got comm=", comm);
  DUALPIPE_REQUIRE(activation_bytes >= 0, "cost act_bytes must not be negative, got act_bytes=", activation_bytes);
  for (std::size_t s = 0; s < stage_scale.size(); ++s) {
    DUALPIPE_REQUIRE(stage_scale[s] > 0, "stage scale must be positive, got ", stage_scale[s], " for stage ", s);
  }
}

std::string CostModel::to_string() const {
  std::string out = detail::concat("F=", forward, ",B=", backward, ",W=", weight,
                                   ",FB=", overlapped.value_or(forward + backward), ",comm=", comm);
  if (activation_bytes > 0) out += detail::concat(",act_bytes=", activation_bytes);
  if (!stage_scale.empty()) {
    out += ",scale=";
    for (std::size_t s = 0; s < stage_scale.size(); ++s) out += detail::concat(s ? ":" : "", stage_scale[s]);
  }
  return out;
}

}  // namespace dualpipe
