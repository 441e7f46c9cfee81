"""A program's end with dualpipe.DualPipeV alive, as training scripts end: steps, a last collective of the program's
own (all_gather_object), destroy_process_group, and the pipeline still referenced (a global) when the interpreter
ends. A Gloo thread that still holds the last collective needs the interpreter's lock to drop its tensors; once the
interpreter has begun to end it exits instead, and the process ends with std::terminate ("terminate called without an
active exception", SIGABRT: 1 run in 4 of bench/bench_real_models.py). So dualpipe's exit handler closes the pipelines
first (deepseek.py, _close_pipelines), without the lock.

    python exit_checks.py [--runs N] [--keep-open]

Runs the two-rank program N times (default 3), each rank a fresh interpreter as torchrun starts them (multiprocessing's
forked children skip the interpreter's end), and exits 0 when every run ended with status 0. The first run checks,
from an exit handler registered before dualpipe is imported (so that it runs after dualpipe's), that the pipeline
let go of its group and refuses to run, naming why. --keep-open unregisters dualpipe's handler (the behaviour
before), and that check fails."""
import argparse
import atexit
import os
import subprocess
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

from ranks import free_port

_kept = []  # the pipeline, alive until the interpreter ends


def check_at_exit(rank, held):
    """Registered before dualpipe is imported, so that it runs after dualpipe's exit handler."""
    try:
        held["pipeline"].last_step_actions()
    except Exception as error:  # noqa: BLE001 - its text is what is checked
        if held["pipe"].group is None:
            print(f"rank {rank}: at exit the pipeline let go of its group and refused to run: {error}", flush=True)
            return
    print(f"rank {rank}: at exit the pipeline was still open", flush=True)
    os._exit(3)


def run_rank(rank, port, keep_open, check):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=2, rank=rank)
    held = {}
    if check:
        atexit.register(check_at_exit, rank, held)
    import dualpipe
    from dualpipe import deepseek
    if keep_open:
        atexit.unregister(deepseek._close_pipelines)
    torch.manual_seed(0)
    stages = [nn.Sequential(nn.Linear(32, 32), nn.Tanh()) for _ in range(4)]
    pipe = dualpipe.DualPipeV((stages[rank], stages[3 - rank]))
    x, y = torch.randn(8, 32), torch.randn(8, 32)
    for _ in range(3):
        if rank == 0:
            pipe.step(x, num_chunks=4, criterion=nn.functional.mse_loss, labels=(y,))
        else:
            pipe.step(num_chunks=4)
    _kept.append(pipe)
    held.update(pipe=pipe, pipeline=pipe._pipelines[4])
    gathered = [None, None]
    dist.all_gather_object(gathered, {"rank": rank, "weights": [p.detach() for p in pipe.parameters()]})
    dist.destroy_process_group()


def one_run(port, keep_open, check):
    """The program on two processes started as torchrun starts them (each a fresh interpreter that ends normally,
    running its exit handlers, unlike multiprocessing's forked children): (status, output) of each."""
    ranks = [subprocess.Popen([sys.executable, __file__, "--rank", str(r), "--port", str(port)]
                              + (["--keep-open"] if keep_open else []) + (["--check"] if check else []),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(2)]
    return [(p.wait(timeout=300), p.stdout.read()) for p in ranks]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep-open", action="store_true")
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank is not None:
        run_rank(args.rank, args.port, args.keep_open, args.check)
        return 0
    failed = 0
    for run in range(args.runs):
        results = one_run(free_port(), args.keep_open, check=run == 0)
        for rank, (status, output) in enumerate(results):
            print(f"run {run} rank {rank}: " + ("ended with status 0" if status == 0 else f"FAILED with status "
                                                 f"{status}"), flush=True)
            if status != 0 or run == 0:
                print(output, end="", flush=True)
        failed += any(status != 0 for status, _ in results)
    print(f"exit checks: {args.runs - failed} of {args.runs} runs ended well")
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
