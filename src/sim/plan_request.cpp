#include "dualpipe/sim/plan_request.h"

#include "dualpipe/util/error.h"

namespace dualpipe {

PlanRequest plan_request(const PlanInputs& in, const PlanInputNames& names) {
  PlanRequest request;
  request.num_ranks = in.ranks;
  request.num_microbatches = in.microbatches;
  request.costs = in.costs;
  request.costs.check();
  DUALPIPE_REQUIRE(in.objective == "makespan" || in.objective == "span", names.objective, " '", in.objective,
                   "' is neither 'makespan' (step time) nor 'span' (largest per-rank span)");
  request.objective = in.objective == "span" ? PlanObjective::Span : PlanObjective::Makespan;
  if (!in.layers.empty()) set_layer_costs(request, in.layers);  // before the limit: it sets act_bytes
  if (in.memory_limit) request.memory_limit = activation_limit(*in.memory_limit, request.costs, names.memory_limit);
  request.placements = in.placements;
  request.automatic = !in.families_only;
  request.max_memory_bytes = in.max_memory_bytes;
  return request;
}

}  // namespace dualpipe
