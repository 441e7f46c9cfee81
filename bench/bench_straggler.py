#!/usr/bin/env python3
"""A straggler made on purpose, and what a re-plan wins back (docs/benchmarks.md, "Stragglers").

1F1B, DualPipe and DualPipeV on the emulated device (`dualpipe train --emulate-device`: every stage's MoE layers
sleep their costs, so the host stays idle as with a GPU), 4 pipeline ranks, 16 layers, 8 micro-batches. From step
5, pipeline rank 2 computes 1.5 times as slowly (`--emulate-slow-rank 2=1.5@5`). Each schedule runs twice:

  report  the straggler watch names it and prints the re-plan; the run goes on as it is
  replan  it checkpoints, restarts the ranks with the re-planned cut (and schedule), and goes on

and gives four step times, each the median of its steps (with the range over --reps repetitions, interleaved):
before the straggler (steps 2-4), with it and no action (the report run from two steps after it was named), and
after the re-plan (the replan run from two steps after its restart); beside each, the planner's prediction: the
simulator with the run's costs at speeds 1 (`dualpipe simulate`), and at the measured speeds the current and the
re-planned pipelines (the straggler record's current_ms and predicted_ms).

    bench/bench_straggler.py [--reps 3] [--steps 20] [--bin build/dualpipe]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

KINDS = ["1f1b", "dualpipe", "dualpipev"]
RANKS, MICROBATCHES, LAYERS = 4, 8, 16
# Per stage of the balanced cut (milliseconds): 4 stages of 4 layers; the V schedules cut 8 stages of 2. A layer's
# forward is 10 ms, well above what the host itself spends on it (about 1 ms of the small model's maths on a shared
# core): the emulated device, and so the slow rank, sets the pace.
COSTS = {"linear": "F=40,B=80,W=40", "v": "F=20,B=40,W=20"}
SLOW = "2=1.5@5"


def costs_of(kind):
    return COSTS["v" if kind == "dualpipev" else "linear"]


def train(binary, kind, steps, mode, workdir):
    metrics = os.path.join(workdir, f"{kind}-{mode}.jsonl")
    command = [binary, "train", "--kind", kind, "--ranks", str(RANKS), "-m", str(MICROBATCHES), "--layers",
               str(LAYERS), "--hidden", "32", "--heads", "2", "--seq-len", "16", "--batch", "1", "--experts", "2",
               "--top-k", "1", "--steps", str(steps), "--eval-every", "0", "--sample-tokens", "0", "--trace", "",
               "--emulate-device", costs_of(kind), "--emulate-slow-rank", SLOW, "--on-straggler", mode,
               "--metrics", metrics]
    if mode == "replan":
        command += ["--checkpoint-dir", os.path.join(workdir, f"{kind}-checkpoints")]
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"bench_straggler: {' '.join(command)} failed:\n{run.stdout}{run.stderr}")
    records = [json.loads(line) for line in open(metrics)]
    steps_ms = {r["step"]: r["step_ms"] for r in records if r["type"] == "step"}
    stragglers = [r for r in records if r["type"] == "straggler"]
    replans = [r for r in records if r["type"] == "replan"]
    return steps_ms, stragglers, replans


def median_of(steps_ms, first, last):
    return statistics.median(steps_ms[s] for s in range(first, last + 1) if s in steps_ms)


def simulated_ms(binary, kind):
    run = subprocess.run([binary, "simulate", "--kind", kind, "--ranks", str(RANKS), "--microbatches",
                          str(MICROBATCHES), "--cost", costs_of(kind), "--format", "json"],
                         capture_output=True, text=True, check=True)
    return json.loads(run.stdout)["makespan"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..", "build", "dualpipe"))
    a = parser.parse_args()
    figures = {kind: {"before": [], "with": [], "after": [], "named_after": [], "pred_with": [], "pred_after": [],
                      "cut": None} for kind in KINDS}
    for rep in range(a.reps):
        for kind in KINDS:
            with tempfile.TemporaryDirectory() as workdir:
                steps_ms, stragglers, _ = train(a.bin, kind, a.steps, "report", workdir)
                f = figures[kind]
                f["before"].append(median_of(steps_ms, 2, 4))
                if stragglers:
                    named = stragglers[0]["step"]
                    f["named_after"].append(named - 5 + 1)
                    f["with"].append(median_of(steps_ms, named + 2, a.steps))
                    f["pred_with"].append(stragglers[0]["replan"]["current_ms"])
                steps_ms, _, replans = train(a.bin, kind, a.steps, "replan", workdir)
                if replans:
                    f["after"].append(median_of(steps_ms, replans[0]["step"] + 2, a.steps))
                    f["pred_after"].append(replans[0]["predicted_ms"])
                    f["cut"] = f"{replans[0]['schedule']} {replans[0]['layers_per_stage']}"
                print(f"  rep {rep + 1} {kind:9s} before {f['before'][-1]:7.1f} ms"
                      + (f"  with {f['with'][-1]:7.1f} ms" if f["with"] else "  (not named)")
                      + (f"  after {f['after'][-1]:7.1f} ms" if replans else "  (not re-planned)"), flush=True)

    def cell(values):
        if not values:
            return "-"
        return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"

    print(f"\n{RANKS} ranks, {MICROBATCHES} micro-batches, {LAYERS} layers; rank 2 at 1.5x from step 5; "
          f"{a.reps} runs each, median (range) of the medians, ms\n")
    print(f"{'schedule':10s} {'before':>22s} {'pred':>6s} {'with straggler':>22s} {'pred':>6s} "
          f"{'after re-plan':>22s} {'pred':>6s} {'after/with':>10s} {'named after':>11s}  re-plan")
    for kind in KINDS:
        f = figures[kind]
        med = lambda key: statistics.median(f[key]) if f[key] else float("nan")
        print(f"{kind:10s} {cell(f['before']):>22s} {simulated_ms(a.bin, kind):6.0f} {cell(f['with']):>22s} "
              f"{med('pred_with'):6.0f} {cell(f['after']):>22s} {med('pred_after'):6.0f} "
              f"{med('after') / med('with'):10.3f} {cell(f['named_after']):>11s}  {f['cut']}")


if __name__ == "__main__":
    main()
