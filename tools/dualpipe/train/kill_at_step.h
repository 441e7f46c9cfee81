// The restart tests' way to lose a rank mid-run (tests/cli/test_train_restart.cpp, docs/launch.md):
// DUALPIPE_TEST_KILL_AT="A:R:S[,A:R:S...]" makes pipeline rank R die by SIGKILL right after step S in attempt A
// (TORCHELASTIC_RESTART_COUNT, 0 without a restarting launcher). Keyed by attempt, so a kill happens once
// although the restarted run passes step S again. Kept in the worker: the training library has no test code.
#pragma once

#include "dualpipe/train/trainer.h"

namespace dualpipe::cli {

// The hooks that carry out DUALPIPE_TEST_KILL_AT; none when it is unset.
train::TrainHooks kill_hooks_from_environment();

}  // namespace dualpipe::cli
