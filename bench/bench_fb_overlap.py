#!/usr/bin/env python3
"""DualPipe's forward-backward overlap on CPU stages, on the two-node test bed (docs/benchmarks.md).

The trainer's MoE model (4 experts, top-2) with --dp 2 --ep 2: the first pipeline on node 0, the second on node 1,
so every expert exchange crosses the rate-limited link. The overlap runs in its default mode (phases interleaved on
one thread), on two threads computing at once, taking turns at each all-to-all, and off; then
DualPipe against 1F1B and ZB-H1 on the same model. Every process computes on this machine's cores, so the step is
bound by the total computation (the emulated-device benchmark measures the GPU's situation instead).

Figures: the medians over steps 3.. of the step time, the all-to-all time and its exposed part (the time in which
none of the rank's threads computed; node 0's worst rank). Every job runs --reps times, interleaved (the whole list
once, then again); each figure is the median over the repetitions with their range (min-max), and a ratio's
"apart" says whether the two ranges do not overlap.

    bench/bench_fb_overlap.py [--reps 3] [--steps 12] [-m 8] [--rate 100mbit]

Needs root (network namespaces); exits with 77 where the test bed cannot be made.
"""
import os
import sys
import tempfile

from testbed_bench import (RatioRows, benchmark_arguments, median_from_step, run_inside_testbed, run_job,
                           spread)

# (name, schedule, --pp, flag)
JOBS = [
    ("dualpipev", "dualpipev", 1, None),
    ("dualpipev threads", "dualpipev", 1, "--fb-overlap-mode=threads"),
    ("dualpipev turns", "dualpipev", 1, "--fb-overlap-mode=turns"),
    ("dualpipev off", "dualpipev", 1, "--no-fb-overlap"),
    ("dualpipe", "dualpipe", 2, None),
    ("dualpipe threads", "dualpipe", 2, "--fb-overlap-mode=threads"),
    ("dualpipe turns", "dualpipe", 2, "--fb-overlap-mode=turns"),
    ("dualpipe off", "dualpipe", 2, "--no-fb-overlap"),
    ("1f1b", "1f1b", 2, None),
    ("zb-h1", "zb-h1", 2, None),
]
FIELDS = ("step_ms", "all_to_all_ms", "all_to_all_exposed_ms")


def main():
    a = benchmark_arguments(__doc__, 8, "the link between the two nodes").parse_args()
    binary = os.path.abspath(a.bin)
    if not os.access(binary, os.X_OK):
        sys.exit(f"bench_fb_overlap.py: {binary} is not built (scripts/build.sh)")
    run_inside_testbed("fbbench", 2, a.rate)
    print(f"MoE model (default size, 4 experts, top-2), --dp 2 --ep 2 -m {a.m}, one pipeline per node, link {a.rate};"
          f" {a.steps} steps per job (medians of steps 3..), {a.reps} repetitions interleaved", flush=True)
    measured = {}  # job name -> [(step, a2a, exposed)] per repetition
    port = 29460
    with tempfile.TemporaryDirectory() as work:
        for rep in range(a.reps):
            for name, kind, pp, flag in JOBS:
                port += 1
                args = ["--schedule", kind, "--pp", str(pp), "--dp", "2", "--ep", "2", "--experts", "4", "--top-k",
                        "2", "-m", str(a.m), "--steps", str(a.steps), "--eval-every", "0", "--sample-tokens", "0",
                        "--master-port", str(port)] + ([flag] if flag else [])
                steps = run_job(binary, name, args, work)
                result = tuple(median_from_step(steps, field) for field in FIELDS)
                measured.setdefault(name, []).append(result)
                print(f"  rep {rep + 1} {name:18s} step {result[0]:8.1f} ms  all-to-all {result[1]:7.1f} ms  "
                      f"exposed {result[2]:7.1f} ms", file=sys.stderr, flush=True)
    report(measured)


def report(measured):
    print(f"\n{'job':20s} {'step ms (min-max)':>26s} {'all-to-all ms (min-max)':>26s} {'exposed ms (min-max)':>26s}")
    for name, *_ in JOBS:
        cells = [spread([r[i] for r in measured[name]]) for i in range(len(FIELDS))]
        print(f"{name:20s}" + "".join(f" {m:9.1f} ({lo:6.1f}-{hi:6.1f})   " for m, lo, hi in cells))
    rows = RatioRows()
    print("\nratios (medians; apart: the repetitions' ranges do not overlap)")
    for schedule in ("dualpipev", "dualpipe"):
        for mode, label in ((schedule, "threads"), (f"{schedule} turns", "turns")):
            step = [r[0] for r in measured[mode]], [r[0] for r in measured[f"{schedule} off"]]
            exposed = [r[2] for r in measured[mode]], [r[2] for r in measured[f"{schedule} off"]]
            rows.row(f"{schedule} {label} / off, exposed a2a", *exposed)
            # The overlap must never make a step slower than no overlap.
            rows.row(f"{schedule} {label} / off, step", *step, target=1.0)
        rows.row(f"{schedule} turns / threads, step", [r[0] for r in measured[f"{schedule} turns"]],
                 [r[0] for r in measured[schedule]])
    for other in ("1f1b", "zb-h1"):
        rows.row(f"dualpipe / {other}, step", [r[0] for r in measured["dualpipe"]], [r[0] for r in measured[other]])
    rows.summary()


if __name__ == "__main__":
    main()
