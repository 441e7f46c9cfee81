"""Weight gradients at W, measured against the simulator: dualpipe.DualPipeV (or DualPipe) on stages whose weight
gradient is costly (bench_python_pipelines.py's "costly W" stage: sleeps of F = 2 ms, I = 2 ms and W = 4 ms by
default, the W part put aside through dualpipe.utils.WeightGradStore), run with defer_weight_grads on and off.

For each mode it prints, over --steps steps (after one warm-up): the median step time (barrier to barrier on rank
0) and the median makespan of the recorded actions (first start to last end over all ranks: one clock, the
processes share the machine's monotonic clock), each with its range; the measured median duration of each action
kind on every rank (last_step_actions()); the median latency of a message (a receive that was already waiting ends
that long after its send started); and `dualpipe.simulate` of the same schedule with those measured F, B (= I + W),
W, F&B and comm costs: the simulated makespan and its ratio to the measured makespan. The goal: within 10% with
deferral on.

    python bench/bench_weight_deferral.py [--kind dualpipev|dualpipe] [--ranks 4] [--microbatches 16] [--steps 7]
                                          [--sleep-ms 2,2,4]
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


def run_rank(rank, ranks, kind, microbatches, steps, defer, port, out, sleeps):
    import dualpipe
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=ranks, rank=rank)
    torch.manual_seed(0)
    stages = 2 * ranks if kind == "dualpipev" else ranks
    blocks = [Sleep(WIDTH, 0, sleeps) for _ in range(stages)]
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
            actions.append(model.last_step_actions())
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
        sleeps = tuple(ms / 1e3 for ms in args.sleep_ms)
        mp.spawn(run_rank, args=(args.ranks, args.kind, args.microbatches, args.steps, defer, port, out, sleeps),
                 nprocs=args.ranks, join=True)
        results = [torch.load(f"{out}.{r}", weights_only=False) for r in range(args.ranks)]
    durations = {k: [] for k, _ in KINDS}
    for result in results:
        for step in result["actions"]:
            for action, start, end in step:
                for k, pattern in KINDS:
                    if pattern.match(action):
                        durations[k].append(end - start)
    steps = [[a for result in results for a in result["actions"][i]] for i in range(args.steps)]
    makespans = [max(end for _, _, end in step) - min(start for _, start, _ in step) for step in steps]
    latencies = [latency for step in steps for latency in message_latencies(step)]
    costs = {k: statistics.median(v) if v else 0.0 for k, v in durations.items()}
    costs["comm"] = statistics.median(latencies) if latencies else 0.0
    return results[0]["times"], makespans, costs


SEND, RECV = re.compile(r"^(\d+)SEND_([FB])(\d+)$"), re.compile(r"^(\d+)RECV_([FB])(\d+)$")


def message_latencies(actions):
    """For each receive that started before its message's send did (so it waited for it): its end minus the send's
    start. SEND_F of stage s pairs with RECV_F of stage s+1, SEND_B of stage s with RECV_B of stage s-1."""
    sends = {}
    for action, start, _ in actions:
        m = SEND.match(action)
        if m:
            sends[(m.group(2), int(m.group(1)), int(m.group(3)))] = start
    out = []
    for action, start, end in actions:
        m = RECV.match(action)
        if not m:
            continue
        kind, stage, microbatch = m.group(2), int(m.group(1)), int(m.group(3))
        sent = sends.get((kind, stage - 1 if kind == "F" else stage + 1, microbatch))
        if sent is not None and start <= sent:
            out.append(end - sent)
    return out


def main():
    import dualpipe
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", choices=["dualpipev", "dualpipe"], default="dualpipev")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=16)
    parser.add_argument("--steps", type=int, default=7, help="timed steps, after one warm-up step")
    parser.add_argument("--sleep-ms", type=lambda v: [float(x) for x in v.split(",")], default=[2, 2, 4],
                        help="the stage's forward, input-gradient and weight-gradient sleeps in ms (default 2,2,4)")
    args = parser.parse_args()
    if len(args.sleep_ms) != 3 or min(args.sleep_ms) < 0:
        parser.error(f"--sleep-ms {args.sleep_ms}: three durations in ms, none negative")
    schedule = dualpipe.schedule(args.kind, args.ranks, args.microbatches)
    f, i, w = args.sleep_ms
    print(f"{args.kind}, {args.ranks} Gloo processes, {args.microbatches} micro-batches, median of {args.steps} "
          f"steps; stages sleep F {f:g} ms, I {i:g} ms, W {w:g} ms")
    print(f"  {'weight gradients':<16}{'step ms':>9}{'range':>15}{'makespan ms':>13}{'range':>15}   "
          f"{'measured medians (ms)':<50}{'simulated ms':>13}{'sim/makespan':>14}")

    def spread(values):
        return f"{min(values) * 1e3:.1f}-{max(values) * 1e3:.1f}"

    for defer in (True, False):
        steps, makespans, cost = measure(args, defer)
        ms = {k: v * 1e3 for k, v in cost.items()}
        whole_backward = ms["I"] + ms["W"] if ms["I"] else ms["B"]
        costs = dualpipe.Costs(F=ms["F"], B=whole_backward, W=ms["W"], FB=ms["FB"] or ms["F"] + whole_backward,
                               comm=ms["comm"])
        simulated = dualpipe.simulate(schedule, costs).makespan
        makespan = statistics.median(makespans) * 1e3
        measured = " ".join(f"{k} {ms[k]:.2f}" for k in [k for k, _ in KINDS] + ["comm"])
        print(f"  {'deferred to W' if defer else 'all at I':<16}{statistics.median(steps) * 1e3:>9.1f}"
              f"{spread(steps):>15}{makespan:>13.1f}{spread(makespans):>15}   {measured:<50}{simulated:>13.1f}"
              f"{simulated / makespan:>14.2f}")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
