"""The simulator's step beside the measured one for data-parallel training: `dualpipe train --pp 2 --dp 2 --zero Z`
with a trace, then `dualpipe compare --step N --format json` on every step after the first. The plan is the trace's
schedule with its REDUCE_GRAD actions (and ZeRO-3's UNSHARD/RESHARD) simulated with costs fitted to that step: each
stage's mean F, B, W and the data-parallel link's reduce from the measured reductions (args.completed). Both steps
run to the last reduction's end.

Prints, per schedule, each step's measured and planned step (ms) and their ratio, then the median and range of the
ratios.

    python bench/bench_data_parallel_plan.py [--dualpipe build/dualpipe] [--schedules 1f1b,dualpipev,dualpipe]
        [--zero 2] [--steps 8] [--hidden 128] [--microbatches 8]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    parser.add_argument("--dualpipe", default=os.path.join(root, "build", "dualpipe"))
    parser.add_argument("--schedules", default="1f1b,dualpipev,dualpipe")
    parser.add_argument("--zero", type=int, default=2)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--microbatches", type=int, default=8)
    args = parser.parse_args()
    if args.steps < 2:
        sys.exit("--steps must be at least 2: step 1 is left out (first-step allocations)")

    with tempfile.TemporaryDirectory() as scratch:
        for schedule in args.schedules.split(","):
            trace = os.path.join(scratch, schedule + ".json")
            train = [args.dualpipe, "train", "--layers", "8", "--hidden", str(args.hidden), "--heads", "4",
                     "--seq-len", "64", "--batch", "2", "--eval-every", "0", "--sample-tokens", "0",
                     "--steps", str(args.steps), "--schedule", schedule, "--pp", "2", "--dp", "2",
                     "-m", str(args.microbatches), "--zero", str(args.zero), "--trace", trace]
            run = subprocess.run(train, capture_output=True, text=True)
            if run.returncode != 0:
                sys.exit(f"{' '.join(train)} failed:\n{run.stdout}{run.stderr}")
            ratios = []
            print(f"{schedule} PP 2 x DP 2 ZeRO-{args.zero}, M={args.microbatches}, hidden {args.hidden}:")
            print(f"  {'step':>4}  {'measured ms':>12}  {'plan ms':>10}  {'measured/plan':>13}")
            for step in range(2, args.steps + 1):
                out = subprocess.run([args.dualpipe, "compare", "--trace", trace, "--step", str(step),
                                      "--format", "json"], capture_output=True, text=True, check=True).stdout
                dp = json.loads(out)["data_parallel"]
                measured, plan = dp["measured_step"] / 1000, dp["plan_step"] / 1000
                ratios.append(measured / plan)
                print(f"  {step:>4}  {measured:>12.1f}  {plan:>10.1f}  {ratios[-1]:>13.3f}")
            print(f"  median measured/plan {statistics.median(ratios):.3f} (range {min(ratios):.3f} to "
                  f"{max(ratios):.3f})\n")


if __name__ == "__main__":
    main()
