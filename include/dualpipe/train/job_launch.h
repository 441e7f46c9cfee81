// The launcher of a `dualpipe train` job, what `dualpipe-train-worker --launch` runs (the process `dualpipe train`
// becomes): it checks the options once, then starts this machine's ranks under `dualpipe launch`'s supervisor
// (launch/launch.h) as forks of itself, so that LibTorch, loaded once by this process, is not loaded again by
// every rank; and starts them again after a re-plan.
#pragma once

#include <functional>

#include "dualpipe/run/train_launch.h"
#include "dualpipe/train/train_config.h"

namespace dualpipe::train {

// A run of the worker in a fork of this process: with `check_only`, the check of the options and the files, else
// one rank (its place in the job from the environment). Its exit status, 0, 1 (failed) or 2 (bad input), having
// said why on stderr, is returned or ends the process at once.
using WorkerRun = std::function<int(bool check_only)>;

// Refuses more ranks than this machine may run (its memory, and a bound); checks `config` in a forked child (a GPU
// check initialises CUDA, which the ranks' parent must not have done), exiting with its status if it fails; takes
// the checkpoint directory's lock for the job's life (another job holding it is refused before any rank starts);
// then supervises this machine's ranks of the job, each a fork calling
// `worker(false)`. Returns the launcher's exit status (launch.h). Throws InvalidArgument for a layout that does not
// fit the world. When the ranks stop for a re-plan (--on-straggler replan: run/replan.h's request beside their
// checkpoint), applies it to `config` (which `worker` runs) and starts them again, resuming.
int launch_training(TrainConfig& config, const run::TrainLaunch& launch, const WorkerRun& worker);

}  // namespace dualpipe::train
