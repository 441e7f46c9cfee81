#!/usr/bin/env python3
"""DualPipe against the other schedules on an emulated device (docs/benchmarks.md, "Emulated device").

Every rank is a machine of its own on the test bed (scripts/testbed.sh --nodes: a network namespace per rank, each
with its own rate-limited link to a switch, as every GPU has its own NIC). Its MoE layers take the simulator's
costs by sleeping on one emulated device per rank (`dualpipe train --emulate-device`), so the host stays nearly
idle, as with a GPU; the expert all-to-alls are real, across the links, padded to the size that takes a2a's time
at the link's rate. The same costs go to `dualpipe simulate`, whose makespan is the predicted step.

The model is the trainer's MoE transformer (4 experts, top-2) with P=4 pipeline ranks x 2 data-parallel replicas
forming expert-parallel groups of 2, so every all-to-all crosses two links. Costs are those of one rank's slice
of the model (1/P): a schedule with 2P stages (DualPipeV, ZBV) runs each at half of them. Two regimes: a2a equal
to F (DeepSeek-V3's 1:1 of communication to computation) and a2a = F/4.

Every job runs --steps steps; the median of steps 3.. is its figure. The jobs run --reps times, interleaved (the
whole list once, then again), and each figure is the median over the repetitions, with their range (min-max).
A ratio's "apart" says whether the two ranges do not overlap: a difference larger than the spread.

    bench/bench_emulated_device.py [--reps 3] [--steps 12] [-m 16] [--rate 100mbit]
                                   [--costs F=20,B=40,W=20] [--trace-dir DIR]

Needs root (network namespaces); exits with 77 where the test bed cannot be made.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PP, DP, EP = 4, 2, 2
MODEL = ["--layers", "8", "--hidden", "16", "--heads", "2", "--seq-len", "16", "--batch", "2",
         "--experts", "4", "--top-k", "2"]

# (name, schedule, flag): the overlap runs in its default mode, with --fb-overlap-threads, and off.
JOBS = [
    ("dualpipe", "dualpipe", None),
    ("dualpipe threads", "dualpipe", "--fb-overlap-threads"),
    ("dualpipe off", "dualpipe", "--no-fb-overlap"),
    ("dualpipev", "dualpipev", None),
    ("dualpipev threads", "dualpipev", "--fb-overlap-threads"),
    ("dualpipev off", "dualpipev", "--no-fb-overlap"),
    ("1f1b", "1f1b", None),
    ("zb-h1", "zb-h1", None),
    ("zbv", "zbv", None),
]
V_SHAPED = {"dualpipev", "zbv"}


def parse_costs(text):
    costs = dict(item.split("=") for item in text.split(","))
    return {k: float(costs[k]) for k in ("F", "B", "W")}


def stage_costs(slice_costs, a2a, kind):
    """The cost string of one stage of `kind`: the slice's costs, halved where the schedule has two stages per
    slice."""
    share = 0.5 if kind in V_SHAPED else 1.0
    c = {k: v * share for k, v in slice_costs.items()}
    return f"F={c['F']:g},B={c['B']:g},W={c['W']:g},a2a={a2a * share:g}"


def predicted_ms(binary, kind, microbatches, costs, overlap):
    """The simulator's makespan for the job: without the overlap a pair is its two halves, exchanges and all."""
    if not overlap:
        c = dict(item.split("=") for item in costs.split(","))
        costs += f",FB={float(c['F']) + float(c['B']) + 2 * float(c['a2a']):g}"
    out = subprocess.run([binary, "simulate", "--kind", kind, "--ranks", str(PP), "-m", str(microbatches),
                          "--cost", costs, "--format", "json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["makespan"]


def run_job(binary, job, costs, a, port, workdir, trace=""):
    """One run over the test bed's nodes; the medians of steps 3.. of step_ms and all_to_all_exposed_ms."""
    name, kind, flag = job
    metrics = os.path.join(workdir, "metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    world = PP * DP
    args = ["train", "--schedule", kind, "--pp", str(PP), "--dp", str(DP), "--ep", str(EP), "-m", str(a.m),
            "--steps", str(a.steps), "--eval-every", "0", "--sample-tokens", "0", "--warmup", "1", *MODEL,
            "--emulate-device", costs, "--emulate-link-rate", a.rate,
            "--nnodes", str(world), "--nproc-per-node", "1", "--master-addr", os.environ["TESTBED_ADDR0"],
            "--master-port", str(port)]
    if flag:
        args.append(flag)
    procs = []
    for node in range(world):
        extra = ["--metrics", metrics, "--trace", trace] if node == 0 else ["--trace", ""]
        log = open(os.path.join(workdir, f"node{node}.log"), "w")
        procs.append((subprocess.Popen(["ip", "netns", "exec", os.environ[f"TESTBED_NODE{node}"], binary, *args,
                                        "--node-rank", str(node), *extra], stdout=log, stderr=subprocess.STDOUT),
                      log))
    failed = []
    for node, (p, log) in enumerate(procs):
        if p.wait(timeout=900) != 0:
            failed.append(node)
        log.close()
    if failed:
        with open(os.path.join(workdir, f"node{failed[0]}.log")) as f:
            sys.exit(f"{name} failed on node {failed[0]}:\n{f.read()[-3000:]}")
    with open(metrics) as f:
        steps = [r for r in map(json.loads, f) if r.get("type") == "step" and r["step"] >= 3]
    return (statistics.median(s["step_ms"] for s in steps),
            statistics.median(s["all_to_all_exposed_ms"] for s in steps))


def spread(values):
    return statistics.median(values), min(values), max(values)


def apart(x, y):
    return max(x) < min(y) or max(y) < min(x)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--steps", type=int, default=12, help="steps per job; the median of steps 3.. is taken")
    parser.add_argument("-m", type=int, default=16, help="micro-batches per step and replica")
    parser.add_argument("--rate", default="100mbit", help="every rank's link")
    parser.add_argument("--costs", default="F=20,B=40,W=20", help="F, B, W of one rank's slice, in ms")
    parser.add_argument("--ratios", default="1,0.25", help="a2a / F of each regime")
    parser.add_argument("--trace-dir", help="also write traces of DualPipe and 1F1B at the first ratio here")
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "dualpipe"))
    a = parser.parse_args()
    binary = os.path.abspath(a.bin)
    if "TESTBED_NODES" not in os.environ:  # run again inside a test bed of one node per rank
        check = subprocess.run([os.path.join(ROOT, "scripts", "testbed.sh"), "check"], capture_output=True, text=True)
        if check.returncode != 0:
            print(check.stdout + check.stderr, end="")
            sys.exit(77)
        sys.exit(subprocess.run([os.path.join(ROOT, "scripts", "testbed.sh"), "run", "emdev", "--nodes",
                                 str(PP * DP), "--rate", a.rate, "--burst", "16384", "--", sys.executable,
                                 *sys.argv]).returncode)
    slice_costs = parse_costs(a.costs)
    ratios = [float(r) for r in a.ratios.split(",")]
    print(f"MoE transformer, P={PP} x DP={DP} (EP={EP}), one rank per node, links of {a.rate}; -m {a.m}, "
          f"{a.steps} steps per job (medians of steps 3..), {a.reps} repetitions interleaved;\n"
          f"costs of one rank's slice {a.costs} ms, a2a = {', '.join(f'{r:g}' for r in ratios)} x F", flush=True)
    port = 29700
    measured = {}  # (ratio, job name) -> [(step ms, exposed ms)] per repetition
    with tempfile.TemporaryDirectory() as work:
        for rep in range(a.reps):
            for ratio in ratios:
                for job in JOBS:
                    costs = stage_costs(slice_costs, ratio * slice_costs["F"], job[1])
                    port += 1
                    result = run_job(binary, job, costs, a, port, work)
                    measured.setdefault((ratio, job[0]), []).append(result)
                    print(f"  rep {rep + 1} a2a {ratio:g}F {job[0]:18s} step {result[0]:8.1f} ms  exposed "
                          f"{result[1]:7.1f} ms", file=sys.stderr, flush=True)
        if a.trace_dir:
            os.makedirs(a.trace_dir, exist_ok=True)
            for job in (JOBS[0], JOBS[6]):
                costs = stage_costs(slice_costs, ratios[0] * slice_costs["F"], job[1])
                port += 1
                run_job(binary, job, costs, a, port, work, os.path.abspath(os.path.join(a.trace_dir,
                                                                                       f"{job[1]}.json")))
    report(binary, a, slice_costs, ratios, measured)


def report(binary, a, slice_costs, ratios, measured):
    failures = []
    for ratio in ratios:
        print(f"\na2a = {ratio:g} x F ({ratio * slice_costs['F']:g} ms per slice's forward)")
        print(f"{'job':20s} {'step ms (min-max)':>26s} {'exposed a2a ms (min-max)':>28s} {'simulated ms':>13s} "
              f"{'error':>7s}")
        for name, kind, flag in JOBS:
            runs = measured[(ratio, name)]
            step = spread([r[0] for r in runs])
            exposed = spread([r[1] for r in runs])
            costs = stage_costs(slice_costs, ratio * slice_costs["F"], kind)
            predicted = predicted_ms(binary, kind, a.m, costs, flag != "--no-fb-overlap")
            error = (predicted - step[0]) / step[0]
            if abs(error) > 0.10:
                failures.append(f"{name} at {ratio:g}F: simulated {error:+.1%} off")
            print(f"{name:20s} {step[0]:9.1f} ({step[1]:7.1f}-{step[2]:7.1f}) {exposed[0]:11.1f} "
                  f"({exposed[1]:6.1f}-{exposed[2]:6.1f}) {predicted:13.1f} {error:+7.1%}")

        def ratio_row(label, num, den, field, target=None, at_most=True):
            x = [r[field] for r in measured[(ratio, num)]]
            y = [r[field] for r in measured[(ratio, den)]]
            value = statistics.median(x) / statistics.median(y)
            verdict = ""
            if target is not None:
                ok = value <= target if at_most else value >= target
                verdict = f"target {'<=' if at_most else '>='} {target:g}: {'met' if ok else 'MISSED'}"
                if not ok:
                    failures.append(f"{label} at {ratio:g}F: x{value:.3f}, {verdict}")
            print(f"  {label:44s} x{value:.3f}  apart: {'yes' if apart(x, y) else 'no '}  {verdict}")

        print("ratios (medians; apart: the repetitions' ranges do not overlap)")
        one_to_one = ratio == 1
        ratio_row("dualpipev overlap / off, exposed a2a", "dualpipev", "dualpipev off", 1, 0.2 if one_to_one else None)
        ratio_row("dualpipev overlap / off, step", "dualpipev", "dualpipev off", 0, 0.8 if one_to_one else 1.0)
        ratio_row("dualpipev threads / off, step", "dualpipev threads", "dualpipev off", 0, 1.0)
        ratio_row("dualpipe overlap / off, exposed a2a", "dualpipe", "dualpipe off", 1)
        ratio_row("dualpipe overlap / off, step", "dualpipe", "dualpipe off", 0, 1.0)
        ratio_row("dualpipe threads / off, step", "dualpipe threads", "dualpipe off", 0, 1.0)
        ratio_row("dualpipe / 1f1b, step", "dualpipe", "1f1b", 0, 1 / 1.15 if one_to_one else 1.0)
        ratio_row("dualpipe / zb-h1, step", "dualpipe", "zb-h1", 0)
        ratio_row("dualpipev / zbv, step", "dualpipev", "zbv", 0)
    print("\nsummary: " + ("every target met" if not failures else "; ".join(failures)))


if __name__ == "__main__":
    main()
