#!/usr/bin/env python3
"""The layout planner's time model against real runs on this machine (docs/layout.md, "Calibrated on this machine").

One traced `dualpipe train` run calibrates the model. Then every layout below runs the command `dualpipe layout`
prints for it, --reps times with the layouts interleaved; its measured step time (the median of each run's steps
after the second, then the median over the runs, with their range) is set beside the calibrated prediction.

    bench/bench_layout_calibration.py [--reps 3] [--steps 14] [--bin build/dualpipe]
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples", "layout")
MODEL = os.path.join(EXAMPLES, "small-moe.json")
MICRO_BATCH, MICROBATCHES = 2, 8

# (pp, dp, ep, schedule, vpp): the calibration run first, then the layouts predicted. The calibration run has
# more ranks than the machine has cores, as most of the layouts do.
CALIBRATION = (4, 1, 1, "1f1b", 1)
LAYOUTS = [
    (2, 1, 1, "1f1b", 1),
    (2, 1, 1, "zb-h1", 1),
    (2, 1, 1, "dualpipev", 2),
    (2, 1, 1, "interleaved-1f1b", 2),
    (2, 1, 1, "dualpipe", 1),
    (4, 1, 1, "dualpipe", 1),
    (4, 1, 1, "zbv", 2),
    (4, 1, 1, "zb-h1", 1),
    (2, 2, 1, "1f1b", 1),
    (2, 2, 1, "zb-h1", 1),
    (2, 2, 2, "1f1b", 1),
    (2, 2, 2, "dualpipev", 2),
]


def name(layout):
    pp, dp, ep, kind, vpp = layout
    return f"pp{pp}" + (f"x{vpp}" if vpp > 1 else "") + (f" dp{dp}" if dp > 1 else "") + \
        (f" ep{ep}" if ep > 1 else "") + f" {kind}"


def plan(binary, layout, calibration=None):
    """The planner's row for the layout: its prediction, and the train command that runs it."""
    pp, dp, ep, kind, vpp = layout
    command = [binary, "layout", "--model", MODEL, "--cluster", os.path.join(EXAMPLES, f"this-machine-x{pp * dp}.json"),
               "--global-batch", str(MICROBATCHES * MICRO_BATCH * dp), "--format", "json",
               "--fix", f"tp=1,cp=1,pp={pp},dp={dp},ep={ep},vpp={vpp},schedule={kind},mbs={MICRO_BATCH},"
                        "recompute=none,zero=0"]
    if calibration:
        command += ["--calibrate", calibration, "--calibrate-mbs", str(MICRO_BATCH)]
    out = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
    return out, out["rows"][0]


def train(binary, row, steps, workdir, tag, trace=""):
    """Runs the row's train command; the step times (ms) after the second step."""
    metrics = os.path.join(workdir, f"{tag}.jsonl")
    args = shlex.split(row["train_command"])[1:] + ["--steps", str(steps), "--eval-every", "0",
                                                    "--sample-tokens", "0", "--metrics", metrics, "--trace", trace]
    done = subprocess.run([binary] + args, cwd=workdir, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{row['train_command']} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    with open(metrics) as f:
        step_ms = [r["step_ms"] for r in map(json.loads, f) if r.get("type") == "step"]
    return step_ms[2:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--steps", type=int, default=14)
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "dualpipe"))
    a = parser.parse_args()
    binary = os.path.abspath(a.bin)
    with tempfile.TemporaryDirectory() as work:
        trace = os.path.join(work, "calibration.json")
        _, row = plan(binary, CALIBRATION)
        print(f"calibration run ({name(CALIBRATION)}): {row['train_command']} --steps {a.steps} --trace {trace}",
              flush=True)
        calibration_ms = train(binary, row, a.steps, work, "calibration", trace)
        rows = {}
        measured = {layout: [] for layout in [CALIBRATION] + LAYOUTS}
        measured[CALIBRATION].append(statistics.median(calibration_ms))
        for layout in [CALIBRATION] + LAYOUTS:
            head, rows[layout] = plan(binary, layout, trace)
        c = head["calibration"]
        print(f"calibrated: matrix products at {c['matmul_efficiency']:.2%} of peak_tflops, "
              f"{c['update_ns_per_parameter']:.1f} ns per parameter updated, step time factor {c['step_time_factor']:.3f}")
        for rep in range(a.reps):
            for layout in [CALIBRATION] + LAYOUTS:
                if layout == CALIBRATION and rep == 0:
                    continue  # the traced run is its first measurement
                measured[layout].append(statistics.median(train(binary, rows[layout], a.steps, work, "run")))
                print(f"  rep {rep + 1} {name(layout):28s} {measured[layout][-1]:8.1f} ms", file=sys.stderr, flush=True)
        print(f"\n{'layout':28s} {'measured ms (min-max)':>26s} {'predicted ms':>13s} {'error':>7s}  within 15%")
        within = 0
        for layout in [CALIBRATION] + LAYOUTS:
            ms = measured[layout]
            predicted = rows[layout]["step_seconds"] * 1e3
            m = statistics.median(ms)
            error = (predicted - m) / m
            ok = abs(error) <= 0.15
            within += ok and layout != CALIBRATION
            label = name(layout) + (" (calibration)" if layout == CALIBRATION else "")
            print(f"{label:28s} {m:10.1f} ({min(ms):6.1f}-{max(ms):6.1f}) {predicted:13.1f} {error:+7.1%}  "
                  f"{'yes' if ok else 'NO'}")
        print(f"\n{within} of {len(LAYOUTS)} layouts predicted within 15% ({a.reps} runs of {a.steps} steps each)")


if __name__ == "__main__":
    main()
