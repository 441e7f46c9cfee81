// The learning rate of each step: linear warm-up from lr/warmup to lr over `warmup` steps, then cosine decay
// to min_lr at the last step (as in nanoGPT and Megatron-LM).
#pragma once

namespace dualpipe::train {

struct LrSchedule {
  double lr = 3e-3, min_lr = 3e-4;
  int warmup = 0, steps = 1;

  // Throws InvalidArgument naming --lr, --min-lr, --warmup or --steps when they do not make a schedule.
  void check() const;
  // `step` counts from 1 (the first optimizer step) to `steps`.
  double at(int step) const;
};

}  // namespace dualpipe::train
