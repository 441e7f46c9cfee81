// The layouts a search meets, and what generating their schedules would take, counted before any schedule is
// generated: a global batch written in the input sets the micro-batch counts, and with them the search's time and
// memory (docs/limits.md).
#pragma once

#include <string>
#include <vector>

#include "dualpipe/layout/layout.h"
#include "dualpipe/schedule/generators.h"

namespace dualpipe::layout {

// Throws InvalidArgument when `layout` does not divide the cluster, the model or the batch (naming the sizes and
// the rule).
void check_divides(const ModelSpec& model, const ClusterSpec& cluster, int global_batch, const Layout& layout);

// The schedule's stages per rank as a layout counts them (vpp): the generator's, or `vpp` where the caller picks
// it (interleaved 1F1B).
int stages_per_rank(const std::string& kind, int vpp);

// The options that generate the layout's pipeline schedule (pp ranks, its micro-batches, vpp where the
// generator takes it).
ScheduleOptions schedule_options(const Layout& layout);

// Every layout that divides and holds the request's fixed values, its micro-batch count set, in the order the
// search meets them.
std::vector<Layout> candidate_layouts(const LayoutRequest& request);

// The distinct schedules the candidates need (one per generator, pipeline, micro-batch count and vpp), by their
// estimated memory (estimate_schedule_bytes). Throws InvalidArgument, naming the global batch and what to change,
// when the largest is above request.max_memory_bytes (the rule of the other planners), or when all of them together
// are above kSearchBytesPerLimit times it (the search generates each once: its time grows with their sum).
// Returns the count and their sum.
struct SearchSize {
  long long schedules = 0;
  double bytes = 0;
};
SearchSize check_search_size(const LayoutRequest& request, const std::vector<Layout>& candidates);

}  // namespace dualpipe::layout
