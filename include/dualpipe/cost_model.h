// Per-action costs for the simulator (spec section 2). Time units are arbitrary.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dualpipe/action.h"

namespace dualpipe {

struct CostModel {
  double forward = 1;   // F: forward of one stage
  double backward = 2;  // B: full backward (input and weight gradients)
  double weight = 1;    // W: weight-gradient part of B, so I = B - W
  std::optional<double> overlapped;  // FB: one overlapped F&B pair; F + B when unset
  double comm = 0;      // latency added to every cross-rank dependency
  std::vector<double> stage_scale;   // per-stage multipliers of all costs; empty means 1 for every stage
  // act_bytes: bytes of one stage's activations for one micro-batch (the simulator's memory unit), measured for
  // your model (for example the runtime's peak_activation_bytes of a one-micro-batch step); 0: not given.
  double activation_bytes = 0;

  double scale(int stage) const;
  // The duration of one compute action; zero for communication actions.
  double duration(const Action& action) const;

  // Parses "F=1,B=2,W=1,FB=3,comm=0,act_bytes=1e6" (any subset, any order; keys case-insensitive,
  // "scale=1:1:2" for per-stage multipliers). Throws InvalidArgument naming the bad key or value.
  static CostModel parse(std::string_view spec);
  // Checks the rules (all costs >= 0, W <= B, FB > 0 when set); throws InvalidArgument naming the value.
  void check() const;
  // The canonical "F=1,B=2,W=1,FB=3,comm=0" form.
  std::string to_string() const;
};

}  // namespace dualpipe
