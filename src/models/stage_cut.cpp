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

StageCut StageCut::parse(const std::string& text, int layers, int stages) {
  StageCut cut;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    char* end = nullptr;
    const long n = item.empty() ? 0 : std::strtol(item.c_str(), &end, 10);
    DUALPIPE_REQUIRE(!item.empty() && end && *end == '\0' && n >= 1 && n <= 100000, "--layers-per-stage '", text,
                     "': '", item, "' is not a positive layer count (write counts like 3,4,4,3)");
    cut.layers_per_stage.push_back(static_cast<int>(n));
    start = comma + 1;
  }
  DUALPIPE_REQUIRE(cut.num_stages() == stages, "--layers-per-stage '", text, "' gives ", cut.num_stages(),
                   " stages, but the schedule has ", stages, " (one count per stage)");
  DUALPIPE_REQUIRE(cut.num_layers() == layers, "--layers-per-stage '", text, "' adds up to ", cut.num_layers(),
                   " layers, but --layers is ", layers);
  return cut;
}

}  // namespace dualpipe::models
