"""How well `dualpipe plan --from-kineto` predicts the step of the run it read: for each schedule, `dualpipe train
--kineto-trace` profiles a few steps with PyTorch's profiler, and the plan simulates the schedule that ran at the
costs the traces measured (plus the update outside the pipeline). Prints measured and predicted side by side.

    python bench/bench_plan_from_kineto.py [--dualpipe build/dualpipe] [--ranks 2] [--repeats 3] [--dp 1 --zero 0]
                                           [--traces DIR [--replay]]

Ranks are processes on this machine: with more processes (ranks x data-parallel replicas) than cores they share
them, which the plan reads and simulates (docs/profile.md).
"""
import argparse
import json
import statistics
import subprocess
import tempfile
from pathlib import Path


def one_run(dualpipe, schedule, ranks, out, data_parallel, replay):
    if not replay:
        subprocess.run([dualpipe, "train", "-r", str(ranks), "--schedule", schedule, "--steps", "6", "--kineto-steps",
                        "4", "--kineto-trace", str(out), "--trace", "", "--eval-every", "0", "--sample-tokens", "0",
                        *data_parallel], check=True, capture_output=True, text=True, timeout=900)
    done = subprocess.run([dualpipe, "plan", "--from-kineto", str(out), "--format", "json"], check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout)["from_kineto"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dualpipe", default="build/dualpipe")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--schedules", default="1f1b,zb-h1,dualpipe,dualpipev")
    parser.add_argument("--dp", type=int, default=1, help="data-parallel replicas of the pipeline")
    parser.add_argument("--zero", type=int, default=0, help="ZeRO stage of the replicas (with --dp above 1)")
    parser.add_argument("--traces", type=Path, help="keep the traced runs in this directory (else a temporary one)")
    parser.add_argument("--replay", action="store_true",
                        help="run nothing: plan from the traces kept in --traces by an earlier run (another build's "
                             "prediction of the same runs)")
    args = parser.parse_args()
    if args.replay and not args.traces:
        parser.error("--replay plans from the traces of --traces DIR: give the directory")
    data_parallel = ["--dp", str(args.dp), "--zero", str(args.zero)] if args.dp > 1 else []
    replicas = f" x DP{args.dp} ZeRO-{args.zero}" if args.dp > 1 else ""
    print(f"R={args.ranks}{replicas}, M=8, the default model; per schedule {args.repeats} runs, each profiling steps "
          f"2-5; median [range] of the runs")
    print(f"{'schedule':<10} {'measured ms':>22} {'predicted ms':>22} {'error':>22}")
    with tempfile.TemporaryDirectory() as tmp:
        kept = args.traces or Path(tmp)
        run_kind = f"r{args.ranks}" + (f"-dp{args.dp}-zero{args.zero}" if args.dp > 1 else "")
        for schedule in args.schedules.split(","):
            runs = [one_run(args.dualpipe, schedule, args.ranks, kept / f"{run_kind}-{schedule}-{i}", data_parallel,
                            args.replay) for i in range(args.repeats)]
            measured = [r["measured_step"] / 1e3 for r in runs]
            predicted = [r["simulated_step"] / 1e3 for r in runs]
            error = [100 * r["simulated_error"] for r in runs]

            def cell(values, unit=""):
                return f"{statistics.median(values):.1f}{unit} [{min(values):.1f}, {max(values):.1f}]"

            print(f"{schedule:<10} {cell(measured):>22} {cell(predicted):>22} {cell(error, '%'):>22}", flush=True)


if __name__ == "__main__":
    main()
