// libFuzzer target: the Python planner's inputs (dualpipe.schedule, dualpipe.Costs, dualpipe.simulate and
// dualpipe.plan in src/python/module.cpp), through the C++ entry points that module calls with them. The input is
// lines: KIND; RANKS MICROBATCHES STAGES_PER_RANK; a cost string (Costs' keywords become one); MEMORY_LIMIT (as
// plan's memory_limit text, may be empty); PLACEMENTS (comma-separated); then the rows of a layer-cost table. Each
// generation and plan is held to 16 MiB of estimated memory (the max_memory the Python caller would give), and the
// exact search to 300k nodes per placement (kExactNodes).
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/schedule/validate.h"
#include "dualpipe/sim/layer_partition.h"
#include "dualpipe/sim/planner.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/util/error.h"

namespace {

constexpr std::int64_t kMaxMemory = std::int64_t{16} << 20;
// The exact search visits up to 3M nodes per placement, 60 ns each in a release build but about 4 us under the
// sanitizers: an input of a few ranks and micro-batches whose search never completes took past libFuzzer's 20 s
// (a CI run's finding). Held to 300k, one placement's search takes at most about a second.
constexpr std::int64_t kExactNodes = 300'000;

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, separator)) parts.push_back(part);
  return parts;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dualpipe;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::string kind, sizes, cost, memory_limit, placements, line, layer_rows;
  std::getline(in, kind);
  std::getline(in, sizes);
  std::getline(in, cost);
  std::getline(in, memory_limit);
  std::getline(in, placements);
  while (std::getline(in, line)) layer_rows += line + "\n";
  int ranks = 0, microbatches = 0, stages_per_rank = 0;
  std::istringstream(sizes) >> ranks >> microbatches >> stages_per_rank;
  try {
    CostModel costs = CostModel::parse(cost);
    costs.check();
    try {  // dualpipe.schedule, then dualpipe.simulate on it
      const Schedule schedule = make_schedule(kind, ScheduleOptions{ranks, microbatches, stages_per_rank, kMaxMemory});
      validate(schedule);
      costs.check_stages(schedule.num_stages);
      (void)simulate(schedule, costs);
    } catch (const Error&) {
    }
    PlanRequest request;  // dualpipe.plan
    request.num_ranks = ranks;
    request.num_microbatches = microbatches;
    request.costs = costs;
    if (!layer_rows.empty()) set_layer_costs(request, parse_layer_costs(layer_rows, "layer_costs"));
    if (!memory_limit.empty()) request.memory_limit = activation_limit(memory_limit, request.costs, "memory_limit");
    if (!placements.empty()) request.placements = split(placements, ',');
    request.max_memory_bytes = kMaxMemory;
    request.exact_node_limit = kExactNodes;
    const Plan plan = plan_schedule(request);
    validate(plan.best.schedule);
  } catch (const Error&) {
  }
  return 0;
}
