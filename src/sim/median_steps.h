// The measured step of a traced run is its slowest rank's median ProfilerStep, which leaves a slow step out; its
// actions' means over every traced step count that step in (steps of 200, 202, 206 and 306 ms put a replay 12.5%
// over, docs/benchmarks.md). Internal to `plan --from-kineto` (kineto_plan.cpp), which reads its costs, the
// actions' spread and the waits from the steps that make that median.
#pragma once

#include <vector>

#include "dualpipe/trace/kineto_ranks.h"

namespace dualpipe {

struct MedianSteps {
  KinetoRanks ranks;       // the traces with only those steps' occurrences of each region and collective
  std::vector<int> steps;  // which traced steps (from 0) they are; empty where the traces were left whole
  int traced = 0;          // how many steps each rank traced (0: none, or not as many on every rank)
};

// The middle step of the slowest rank's steps by duration, or the middle two of an even number, on every rank: the
// occurrences that start from each rank's own ProfilerStep of those numbers to its next one (before the first
// step: the first's; after the last: the last's). The traces whole where fewer than three steps were traced, the
// ranks traced different numbers of steps, or a trace holds several processes. A region's compute and communication
// per occurrence stay the means over every step (the trace's summary keeps no occurrence's own).
MedianSteps median_steps(const KinetoRanks& ranks);

}  // namespace dualpipe
