// The time model of one layout, per pipeline stage: the simulator's F, B, W and F&B costs in seconds, with the
// tensor-, context- and expert-parallel communication a stage leaves exposed, and each stage's parameters.
#pragma once

#include <vector>

#include "dualpipe/layout/layout.h"
#include "dualpipe/sim/cost_model.h"

namespace dualpipe::layout {

struct StageParameters {
  double dense = 0;    // replicated over the data-parallel ranks (attention, dense FFN, shared experts, ...)
  double experts = 0;  // routed experts, already divided by ep
};

struct PipelineCosts {
  CostModel costs;  // per stage, seconds; comm is one point-to-point message; FB set where pairs hide all-to-all
  // Of a micro-batch's F + B summed over the stages (seconds): compute, the recomputed forwards, each exposed
  // communication, and the communication hidden behind compute.
  double compute = 0, recompute = 0, tp = 0, cp = 0, ep = 0;
  double tp_hidden = 0, cp_hidden = 0, ep_hidden = 0;
  double flops = 0;  // executed, recomputation included
  std::vector<StageParameters> parameters;  // per stage (already divided by tp)
  std::vector<int> layers_per_stage;
};

// overlapped_pairs: the schedule runs forward-backward pairs (DualPipe, DualPipeV), which hide the expert
// all-to-all behind the other micro-batch's compute. Throws InvalidArgument when the layout has more stages than
// the model has layers.
PipelineCosts pipeline_costs(const ModelSpec& model, const ClusterSpec& cluster, const Layout& layout,
                             bool overlapped_pairs);

}  // namespace dualpipe::layout
