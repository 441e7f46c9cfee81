// Simulator costs from a PyTorch profiler trace: the median durations of the regions a program marked with
// record_function, read as F, B, W, F&B and one message's time (`dualpipe profile --kineto`).
#pragma once

#include <string>
#include <vector>

#include "dualpipe/sim/cost_model.h"
#include "dualpipe/trace/kineto.h"

namespace dualpipe {

// The region names read as each cost; an empty name is not read.
struct KinetoCostNames {
  std::string forward = "forward";
  std::string backward = "backward";          // the whole backward, or its input-gradient part when weight is given
  std::string weight = "weight";              // the weight-gradient part, when the program splits its backward
  std::string overlapped = "forward_backward";  // one overlapped forward and backward pair
  std::string comm = "p2p";                   // one pipeline message
};

struct KinetoCosts {
  CostModel costs;                    // microseconds
  std::vector<std::string> warnings;  // what had to be assumed
};

// Throws InvalidArgument naming the missing region and listing the regions the trace has, when the forward or
// backward region is missing.
KinetoCosts costs_from_kineto(const KinetoSummary& summary, const KinetoCostNames& names);

}  // namespace dualpipe
