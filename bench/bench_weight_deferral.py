"""Weight gradients at W, measured against the simulator: dualpipe.DualPipeV (or DualPipe) on stages whose weight
gradient is costly (bench_python_pipelines.py's "costly W" stage: sleeps of F = 2 ms, I = 2 ms and W = 4 ms, the
W part put aside through dualpipe.utils.WeightGradStore), run with defer_weight_grads on and off.

For each mode it prints the median step time and its range over --steps steps (after one warm-up), the measured
median duration of each action kind on every rank (from last_step_actions()), and `dualpipe.simulate` of the same
schedule with those measured F, B (= I + W), W and F&B costs: the simulated makespan and its ratio to the measured
step. The goal: within 10% with deferral on.

    python bench/bench_weight_deferral.py [--kind dualpipev|dualpipe] [--ranks 4] [--microbatches 16] [--steps 7]
"""
import argparse
import os
import re
import socket
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_python_pipelines import Sleep, criterion  # noqa: E402  (the "costly W" stage)

WIDTH = 8


def run_rank(rank, ranks, kind, microbatches, steps, defer, port, out):
    import dualpipe
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=ranks, rank=rank)
    torch.manual_seed(0)
    stages = 2 * ranks if kind == "dualpipev" else ranks
    blocks = [Sleep(WIDTH, 0) for _ in range(stages)]
    x, l = torch.randn(microbatches, 4, WIDTH), torch.randn(microbatches, 4, WIDTH)
    if kind == "dualpipev":
        model = dualpipe.DualPipeV((blocks[rank], blocks[2 * ranks - 1 - rank]), defer_weight_grads=defer,
                                   record_actions=True)
        x, l = (x, l) if rank == 0 else (None, None)
    else:
        model = dualpipe.DualPipe((blocks[rank], blocks[ranks - 1 - rank]), defer_weight_grads=defer,
                                  record_actions=True)
        end = {0: 0, ranks - 1: 1}.get(rank)
        x, l = (x.chunk(2)[end], l.chunk(2)[1 - end]) if end is not None else (None, None)
    times, actions = [], []
    for i in range(steps + 1):
        dist.barrier()
        start = time.perf_counter()
        model.step(x, num_chunks=microbatches, criterion=criterion, labels=(l,))
        dist.barrier()
        if i > 0:
            times.append(time.perf_counter() - start)
            actions.extend(model.last_step_actions())
        model.zero_grad(set_to_none=True)
    torch.save({"times": times, "actions": actions}, f"{out}.{rank}")
    dist.destroy_process_group()


KINDS = [("F", re.compile(r"^\d+F\d+$")), ("B", re.compile(r"^\d+B\d+$")), ("I", re.compile(r"^\d+I\d+$")),
         ("W", re.compile(r"^\d+W\d+$")), ("FB", re.compile(r"^\(.*\)$"))]


def measure(args, defer):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rank")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mp.spawn(run_rank, args=(args.ranks, args.kind, args.microbatches, args.steps, defer, port, out),
                 nprocs=args.ranks, join=True)
        results = [torch.load(f"{out}.{r}") for r in range(args.ranks)]
    durations = {k: [] for k, _ in KINDS}
    for result in results:
        for action, start, end in result["actions"]:
            for k, pattern in KINDS:
                if pattern.match(action):
                    durations[k].append(end - start)
    steps = results[0]["times"]
    return steps, {k: statistics.median(v) if v else 0.0 for k, v in durations.items()}


def main():
    import dualpipe
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", choices=["dualpipev", "dualpipe"], default="dualpipev")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=16)
    parser.add_argument("--steps", type=int, default=7, help="timed steps, after one warm-up step")
    args = parser.parse_args()
    schedule = dualpipe.schedule(args.kind, args.ranks, args.microbatches)
    print(f"{args.kind}, {args.ranks} Gloo processes, {args.microbatches} micro-batches, median of {args.steps} "
          f"steps; stages sleep F 2 ms, I 2 ms, W 4 ms")
    print(f"  {'weight gradients':<18}{'step ms':>10}{'range ms':>18}   measured action medians (ms)"
          f"{'':<22}{'simulated ms':>14}{'sim/step':>10}")
    for defer in (True, False):
        steps, cost = measure(args, defer)
        ms = {k: v * 1e3 for k, v in cost.items()}
        whole_backward = ms["I"] + ms["W"] if ms["I"] else ms["B"]
        costs = dualpipe.Costs(F=ms["F"], B=whole_backward, W=ms["W"], FB=ms["FB"] or ms["F"] + whole_backward)
        simulated = dualpipe.simulate(schedule, costs).makespan
        step = statistics.median(steps) * 1e3
        measured = " ".join(f"{k} {ms[k]:.2f}" for k, _ in KINDS)
        spread = f"{min(steps) * 1e3:.1f}-{max(steps) * 1e3:.1f}"
        print(f"  {'deferred to W' if defer else 'all at I':<18}{step:>10.1f}{spread:>18}   {measured:<50}"
              f"{simulated:>14.1f}{simulated / step:>10.2f}")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
