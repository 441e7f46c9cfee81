#include "dualpipe/models/stage_cut.h"

#include <cstdlib>
#include <numeric>

#include "dualpipe/util/error.h"

namespace dualpipe::models {

int StageCut::num_layers() const { return std::accumulate(layers_per_stage.begin(), layers_per_stage.end(), 0); }

int StageCut::first_layer(int stage) const {
  DUALPIPE_CHECK(stage >= 0 && stage < num_stages(), "stage ", stage, " of ", num_stages());
  return std::accumulate(layers_per_stage.begin(), layers_per_stage.begin() + stage, 0);
}

std::string StageCut::to_string() const {
  std::string out;
  for (int n : layers_per_stage) out += (out.empty() ? "" : ",") + std::to_string(n);
  return out;
}

StageCut StageCut::balanced(int layers, int stages) {
  DUALPIPE_REQUIRE(stages >= 1, "a model needs at least one stage, got ", stages);
  DUALPIPE_REQUIRE(layers >= stages, "--layers ", layers, " is fewer than the schedule's ", stages,
                   " stages: every stage needs at least one layer (raise --layers or use fewer --ranks)");
  StageCut cut;
  for (int s = 0; s < stages; ++s) cut.layers_per_stage.push_back(layers / stages + (s < layers % stages ? 1 : 0));
  return cut;
}

StageCut StageCut::of(std::vector<int> counts, int layers, int stages) {
  StageCut cut{std::move(counts)};
  const std::string text = cut.to_string();
  for (const int n : cut.layers_per_stage)
    DUALPIPE_REQUIRE(n >= 1, "--layers-per-stage '", text, "': ", n, " is not a positive layer count (write counts "
                     "like 3,4,4,3)");
  DUALPIPE_REQUIRE(cut.num_stages() == stages, "--layers-per-stage '", text, "' gives ", cut.num_stages(),
                   " stages, but the schedule has ", stages, " (one count per stage)");
  DUALPIPE_REQUIRE(cut.num_layers() == layers, "--layers-per-stage '", text, "' adds up to ", cut.num_layers(),
                   " layers, but --layers is ", layers);
  return cut;
}

}  // namespace dualpipe::models
