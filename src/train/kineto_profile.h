// `dualpipe train --kineto-trace DIR`: PyTorch's own profiler (Kineto) over --kineto-steps training steps from step 2
// (step 1 is checked against a single-process run), each step a ProfilerStep#N region and each training action a
// region the executor names as `dualpipe profile` reads costs ("forward stage 3"); every rank writes
// DIR/rank<N>.pt.trace.json with the schedule it ran, which `dualpipe plan --from-kineto` simulates beside the
// measured step.
#pragma once

#include <memory>
#include <string>

#include "dualpipe/schedule/schedule.h"
#include "dualpipe/train/train_config.h"

namespace dualpipe::train {

// Refuses, before the run, a directory that already holds traces (a plan would read two runs as one), and a run
// with no step after step 1 to profile. Whether it can be made is output_dirs.h's.
void check_kineto_trace_dir(const std::string& dir, int steps, int profiled_steps);

class KinetoProfile {
 public:
  KinetoProfile();  // off
  // Profiles --kineto-steps steps from `first` (2, or the first step after a resumed checkpoint) into
  // --kineto-trace; off without one.
  KinetoProfile(const TrainConfig& c, const Schedule& schedule, int world_rank, int world_size, int first);
  ~KinetoProfile();
  KinetoProfile(KinetoProfile&&) noexcept;
  KinetoProfile& operator=(KinetoProfile&&) noexcept;

  // The region of one step, to hold while it runs (null outside the steps profiled); the profiler starts at the
  // first step profiled, and the step after the last saves the trace.
  [[nodiscard]] std::shared_ptr<void> step(int number);
  // A region inside the step (the update, after the pipeline), to hold while it runs.
  [[nodiscard]] std::shared_ptr<void> region(const char* name);
  // Stops the profiler and writes this rank's trace (whole or not at all), once; returns its path, empty when
  // nothing was profiled.
  std::string save();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace dualpipe::train
