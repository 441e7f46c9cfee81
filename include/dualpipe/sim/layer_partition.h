// Uneven models: per-layer costs, and the balanced cut of the layers into stages for each placement (a V cuts the
// model into 2R stages, a linear cut into R). The planner simulates each schedule with the cut of its stage count.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "dualpipe/schedule/placement.h"
#include "dualpipe/sim/cost_model.h"

namespace dualpipe {

struct LayerCost {
  double forward = 0;           // F of this layer for one micro-batch
  double backward = 0;          // full backward B (input and weight gradients)
  double weight = 0;            // its weight-gradient part W
  double activation_bytes = 0;  // activations it keeps for its backward, one micro-batch
};

// Reads a layer-cost table: one line per layer in model order, "F B W act_bytes" separated by commas or blanks;
// an optional first line naming the columns (starting with a letter); blank lines and '#' comments are skipped.
// Throws InvalidArgument naming `source`, the line and the rule (positive F and B, 0 <= W <= B, act_bytes >= 0).
std::vector<LayerCost> parse_layer_costs(std::string_view text, const std::string& source);

// Reads and parses a layer-cost file (`plan --layer-costs`), at most 64 MiB (util/file_input.h's rules).
std::vector<LayerCost> read_layer_costs(const std::string& path);

// The contiguous cut of the layers into num_stages stages whose slowest stage (F + B per micro-batch) is as fast as
// possible; among those, the one whose largest stage activation is smallest. Needs as many layers as stages.
std::vector<int> balanced_cut(const std::vector<LayerCost>& layers, int num_stages);

// The contiguous cut of the layers into the placement's stages for ranks of unequal speed (CostModel::rank_speed,
// one per rank): each rank's work (F + B of every stage it runs, for every micro-batch it runs it for), divided by
// its speed, as even as it can be made. It moves layers off a slow rank's stages: for DualPipe and the V schedules
// both of them, since a rank runs two. Starts from balanced_cut and moves one layer across a stage boundary at a
// time while that lowers the busiest rank's time (or, at equal, the spread of the others), so the result is a local
// optimum of that objective; the simulator then judges the whole schedule. Needs as many layers as stages.
std::vector<int> speed_balanced_cut(const std::vector<LayerCost>& layers, const Placement& placement,
                                    int num_microbatches, const std::vector<double>& rank_speed);

// The cost model of a cut: per-stage F, B, W (sums over the stage's layers) and activation sizes, with act_bytes the
// activation of a 1/R slice (total / R) so that memory limits keep their unit; act_scale holds each stage's bytes
// over its nominal share (R/S of a slice). comm, FB, w_mem, recompute and input_mem come from `base`.
CostModel costs_of_cut(const std::vector<LayerCost>& layers, const std::vector<int>& cut, int num_ranks,
                       const CostModel& base);

// "3,4,4,3": the form of `dualpipe train --layers-per-stage`.
std::string format_cut(const std::vector<int>& cut);

}  // namespace dualpipe
