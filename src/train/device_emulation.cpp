#include "device_emulation.h"

#include <cmath>
#include <regex>

#include "dualpipe/sim/cost_model.h"
#include "dualpipe/util/error.h"

namespace dualpipe::train {

double parse_link_rate(const std::string& option, const std::string& text) {
  static const std::regex rate(R"(([0-9]+(\.[0-9]+)?)([kmg]?)bit)");
  std::smatch m;
  DUALPIPE_REQUIRE(std::regex_match(text, m, rate), option, " '", text,
                   "' must be a rate written like 100mbit, 1gbit or 800kbit");
  const double unit = m[3] == "k" ? 1e3 : m[3] == "m" ? 1e6 : m[3] == "g" ? 1e9 : 1.0;
  const double bits = std::stod(m[1]) * unit;
  DUALPIPE_REQUIRE(bits >= 8000, option, " '", text, "' must be at least 8kbit");
  return bits;
}

std::vector<models::EmulatedLayer> emulated_stages(const TrainConfig& c, const models::StageCut& cut) {
  if (c.device.emulate.empty()) {
    DUALPIPE_REQUIRE(c.device.emulate_link_rate.empty(), "--emulate-link-rate needs --emulate-device COSTS");
    return {};
  }
  DUALPIPE_REQUIRE(c.model.experts > 0, "--emulate-device emulates the compute of MoE layers: give --experts N");
  DUALPIPE_REQUIRE(c.device.kind == run::DeviceKind::Cpu, "--emulate-device runs on the CPU, got --device cuda");
  CostModel costs;
  try {
    costs = CostModel::parse(c.device.emulate);
    costs.check_stages(cut.num_stages());
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(detail::concat("--emulate-device '", c.device.emulate, "': ", e.what()));
  }
  DUALPIPE_REQUIRE(!costs.overlapped && costs.comm == 0, "--emulate-device '", c.device.emulate,
                   "' sets FB or comm, which the run measures: give F, B, W and a2a (in milliseconds)");
  double bytes_per_ms = 0;
  if (costs.all_to_all > 0) {
    DUALPIPE_REQUIRE(c.parallel.ep > 1, "--emulate-device's a2a needs expert parallelism (--ep above 1), got --ep ", c.parallel.ep);
    DUALPIPE_REQUIRE(!c.device.emulate_link_rate.empty(),
                     "--emulate-device's a2a needs --emulate-link-rate RATE (like 100mbit) to size the exchanges");
    bytes_per_ms = parse_link_rate("--emulate-link-rate", c.device.emulate_link_rate) / 8 / 1000;
  }
  // Costs given per stage are that stage's; a uniform cost is a stage's of the balanced cut, so each layer keeps
  // its share and a stage of more layers (an uneven --layers-per-stage, a re-plan) takes longer.
  const bool per_stage = !costs.stage_forward.empty();
  const double nominal = static_cast<double>(cut.num_layers()) / cut.num_stages();
  std::vector<models::EmulatedLayer> stages;
  for (int s = 0; s < cut.num_stages(); ++s) {
    const double layers = per_stage ? cut.layers_per_stage[s] : nominal;
    const auto us = [&](double ms) { return static_cast<int64_t>(std::llround(ms * 1000 / layers)); };
    models::EmulatedLayer layer;
    layer.forward_us = us(costs.forward_of(s));
    layer.input_grad_us = us(costs.input_of(s));
    layer.weight_grad_us = us(costs.weight_of(s));
    layer.exchange_bytes = static_cast<int64_t>(std::llround(costs.all_to_all_of(s) / (2 * layers) * bytes_per_ms));
    stages.push_back(layer);
  }
  return stages;
}

}  // namespace dualpipe::train
