// How a model's layers are cut into pipeline stages: stage s holds layers_per_stage[s] consecutive layers.
// LibTorch-free, so the cut can be checked and printed anywhere.
#pragma once

#include <string>
#include <vector>

namespace dualpipe::models {

struct StageCut {
  std::vector<int> layers_per_stage;

  int num_stages() const { return static_cast<int>(layers_per_stage.size()); }
  int num_layers() const;
  int first_layer(int stage) const;
  // "3,4,4,3"
  std::string to_string() const;

  // `layers` as evenly as possible over `stages`, the larger parts first (10 over 4: 3,3,2,2). Throws
  // InvalidArgument when there are more stages than layers.
  static StageCut balanced(int layers, int stages);
  // --layers-per-stage's counts ({3, 4, 4, 3}): positive, one per stage, adding up to `layers`. Throws
  // InvalidArgument naming the counts and the rule that fails.
  static StageCut of(std::vector<int> counts, int layers, int stages);
};

}  // namespace dualpipe::models
