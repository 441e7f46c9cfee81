#!/usr/bin/env python3
"""DualPipe against the other schedules on an emulated device (docs/benchmarks.md, "Emulated device").

Every rank is a machine of its own on the test bed (scripts/testbed.sh --nodes: a network namespace per rank, each
with its own rate-limited link to a switch, as every GPU has its own NIC). Its MoE layers take the simulator's
costs by sleeping on one emulated device per rank (`dualpipe train --emulate-device`), so the host stays nearly
idle, as with a GPU; the expert all-to-alls are real, across the links, padded to the size that takes a2a's time
at the link's rate. The links carry jumbo frames (--mtu 9000): the kernel's work per packet, which a NIC does
on a real machine, took the ranks' two cores from their host work (docs/benchmarks.md, "Jumbo frames"). The
same costs go to `dualpipe simulate`, whose makespan is the predicted step.

The model is the trainer's MoE transformer (4 experts, top-2) with P=4 pipeline ranks x 2 data-parallel replicas
forming expert-parallel groups of 2, so every all-to-all crosses two links. Costs are those of one rank's slice
of the model (1/P): a schedule with 2P stages (DualPipeV, ZBV, combined 1F1B) runs each at half of them. Two
regimes: a2a equal to F (DeepSeek-V3's 1:1 of communication to computation) and a2a = F/4.

Every job runs --steps steps; the median of steps 3.. is its figure. The jobs run --reps times, interleaved (the
whole list once, then again), and each figure is the median over the repetitions, with their range (min-max).
A ratio's "apart" says whether the two ranges do not overlap: a difference larger than the spread.

    bench/bench_emulated_device.py [--reps 3] [--steps 12] [-m 16] [--rate 100mbit]
                                   [--costs F=20,B=40,W=20] [--ratios 1,0.25] [--trace-dir DIR] [--jobs NAMES]
                                   [--mtu 9000]
    bench/bench_emulated_device.py --resimulate DIR

Needs root (network namespaces); exits with 77 where the test bed cannot be made. --trace-dir keeps every job's
trace and the measured figures (measured.json); --resimulate DIR prints that run's table again with the simulated
column taken anew from its traces by the current `dualpipe simulate` (a model change checked against a kept run).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from testbed_bench import (RatioRows, benchmark_arguments, median_from_step, run_inside_testbed, run_job,
                           spread)

PP, DP, EP = 4, 2, 2
MODEL = ["--layers", "8", "--hidden", "16", "--heads", "2", "--seq-len", "16", "--batch", "2",
         "--experts", "4", "--top-k", "2"]

# (name, schedule, flag): the overlap as phases on one thread (the default), with its halves on two threads at once,
# and off.
JOBS = [
    ("dualpipe", "dualpipe", None),
    ("dualpipe threads", "dualpipe", "--fb-overlap-mode=threads"),
    ("dualpipe off", "dualpipe", "--no-fb-overlap"),
    ("dualpipev", "dualpipev", None),
    ("dualpipev threads", "dualpipev", "--fb-overlap-mode=threads"),
    ("dualpipev off", "dualpipev", "--no-fb-overlap"),
    ("1f1b", "1f1b", None),
    ("zb-h1", "zb-h1", None),
    ("zbv", "zbv", None),
    ("combined-1f1b", "combined-1f1b", None),
    ("combined-1f1b off", "combined-1f1b", "--no-fb-overlap"),
]
TWO_STAGES_PER_RANK = {"dualpipev", "zbv", "combined-1f1b"}  # combined 1F1B: its default 2 virtual stages
LAYERS = 8  # MODEL's


def parse_costs(text):
    costs = dict(item.split("=") for item in text.split(","))
    return {k: float(costs[k]) for k in ("F", "B", "W")}


def stage_costs(slice_costs, a2a, kind):
    """The cost string of one stage of `kind`: the slice's costs, halved where the schedule has two stages per
    slice."""
    share = 0.5 if kind in TWO_STAGES_PER_RANK else 1.0
    c = {k: v * share for k, v in slice_costs.items()}
    return f"F={c['F']:g},B={c['B']:g},W={c['W']:g},a2a={a2a * share:g}"


def layers_per_stage(kind):
    return LAYERS // (2 * PP if kind in TWO_STAGES_PER_RANK else PP)


def predicted_ms(binary, job, microbatches, costs, trace):
    """The simulator's makespan for the job, with each exchange as long as the job's trace measured it
    (`--from-trace`), its pairs and lone backwards timed as the job runs them (`pair=`): phase by phase, its halves
    on two threads, or without overlap, a pair its two halves, exchanges and all."""
    _, kind, flag = job
    pair = {None: "phases", "--fb-overlap-mode=threads": "threads", "--no-fb-overlap": "off"}[flag]
    costs += f",layers={layers_per_stage(kind)},pair={pair}"
    command = [binary, "simulate", "--kind", kind, "--ranks", str(PP), "-m", str(microbatches), "--format", "json",
               "--from-trace", trace]
    out = subprocess.run(command + ["--cost", costs], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["makespan"]


def run_emulated(binary, job, costs, a, port, workdir, trace):
    """One job across the test bed's nodes: the medians of steps 3.. of the step time and the exposed all-to-all,
    and the time of one exchange in its trace."""
    name, kind, flag = job
    args = ["--schedule", kind, "--pp", str(PP), "--dp", str(DP), "--ep", str(EP), "-m", str(a.m),
            "--steps", str(a.steps), "--eval-every", "0", "--sample-tokens", "0", "--warmup", "1", *MODEL,
            "--emulate-device", costs, "--emulate-link-rate", a.rate, "--nproc-per-node", "1",
            "--master-port", str(port)]
    if flag:
        args.append(flag)
    steps = run_job(binary, name, args, workdir, trace)
    return median_from_step(steps, "step_ms"), median_from_step(steps, "all_to_all_exposed_ms"), trace


def main():
    parser = benchmark_arguments(__doc__, 16, "every rank's link")
    parser.add_argument("--costs", default="F=20,B=40,W=20", help="F, B, W of one rank's slice, in ms")
    parser.add_argument("--ratios", default="1,0.25", help="a2a / F of each regime")
    parser.add_argument("--trace-dir", help="also keep every job's trace (JOB-RATIO-REP.json) and the measured "
                        "figures (measured.json) here")
    parser.add_argument("--resimulate", metavar="DIR", help="no run: the table of the run kept in DIR (--trace-dir), "
                        "simulated anew from its traces")
    parser.add_argument("--mtu", type=int, default=9000, help="the links' packet size in bytes (1500: the "
                        "kernel's default, as the runs before 2026-11-30's fourth)")
    parser.add_argument("--jobs", help="run only these jobs (names as printed, comma-separated); ratios whose jobs "
                        "did not run are left out")
    a = parser.parse_args()
    if a.resimulate:
        resimulate(os.path.abspath(a.bin), a.resimulate)
        return
    jobs = [job for job in JOBS if not a.jobs or job[0] in a.jobs.split(",")]
    if not jobs:
        parser.error(f"--jobs {a.jobs}: none of the jobs {', '.join(job[0] for job in JOBS)}")
    binary = os.path.abspath(a.bin)
    run_inside_testbed("emdev", PP * DP, a.rate, burst=16384, mtu=a.mtu)  # one node per rank
    slice_costs = parse_costs(a.costs)
    ratios = [float(r) for r in a.ratios.split(",")]
    print(f"MoE transformer, P={PP} x DP={DP} (EP={EP}), one rank per node, links of {a.rate} (MTU {a.mtu}); "
          f"-m {a.m}, {a.steps} steps per job (medians of steps 3..), {a.reps} repetitions interleaved;\n"
          f"costs of one rank's slice {a.costs} ms, a2a = {', '.join(f'{r:g}' for r in ratios)} x F", flush=True)
    port = 29700
    measured = {}  # (ratio, job name) -> [(step ms, exposed ms, simulated ms)] per repetition
    kept = {"costs": a.costs, "m": a.m, "ratios": ratios, "jobs": [job[0] for job in jobs], "runs": []}
    with tempfile.TemporaryDirectory() as work:
        for rep in range(a.reps):
            for ratio in ratios:
                for job in jobs:
                    costs = stage_costs(slice_costs, ratio * slice_costs["F"], job[1])
                    port += 1
                    trace = os.path.join(work, f"{job[0].replace(' ', '-')}-{ratio:g}-{rep + 1}.json")
                    step, exposed, _ = run_emulated(binary, job, costs, a, port, work, trace)
                    predicted = predicted_ms(binary, job, a.m, costs, trace)
                    measured.setdefault((ratio, job[0]), []).append((step, exposed, predicted))
                    print(f"  rep {rep + 1} a2a {ratio:g}F {job[0]:18s} step {step:8.1f} ms  exposed "
                          f"{exposed:7.1f} ms  simulated {predicted:8.1f} ms", file=sys.stderr, flush=True)
                    if a.trace_dir:
                        os.makedirs(a.trace_dir, exist_ok=True)
                        shutil.copy(trace, os.path.join(a.trace_dir, os.path.basename(trace)))
                        kept["runs"].append({"rep": rep + 1, "ratio": ratio, "job": job[0], "step": step,
                                             "exposed": exposed, "simulated": predicted})
                        with open(os.path.join(a.trace_dir, "measured.json"), "w") as f:
                            json.dump(kept, f, indent=1)
    report(slice_costs, ratios, measured, jobs, a.m)


def resimulate(binary, directory):
    """The table of the run kept in `directory`, its simulated column from its traces by `binary`; a job whose trace
    is missing keeps the run's own figure (said on stderr)."""
    with open(os.path.join(directory, "measured.json")) as f:
        kept = json.load(f)
    slice_costs = parse_costs(kept["costs"])
    jobs = [job for job in JOBS if job[0] in kept["jobs"]]
    measured = {}
    for run in kept["runs"]:
        job = next(j for j in jobs if j[0] == run["job"])
        trace = os.path.join(directory, f"{job[0].replace(' ', '-')}-{run['ratio']:g}-{run['rep']}.json")
        simulated = run["simulated"]
        if os.path.exists(trace):
            costs = stage_costs(slice_costs, run["ratio"] * slice_costs["F"], job[1])
            simulated = predicted_ms(binary, job, kept["m"], costs, trace)
        else:
            print(f"  no {trace}: the run's simulated {simulated:.1f} ms kept", file=sys.stderr)
        print(f"  rep {run['rep']} a2a {run['ratio']:g}F {job[0]:18s} simulated {run['simulated']:8.1f} ms, now "
              f"{simulated:8.1f} ms", file=sys.stderr, flush=True)
        measured.setdefault((run["ratio"], job[0]), []).append((run["step"], run["exposed"], simulated))
    report(slice_costs, kept["ratios"], measured, jobs, kept["m"])


def report(slice_costs, ratios, measured, jobs, a_m):
    rows = RatioRows()
    for ratio in ratios:
        print(f"\na2a = {ratio:g} x F ({ratio * slice_costs['F']:g} ms per slice's forward)")
        print(f"{'job':20s} {'step ms (min-max)':>26s} {'exposed a2a ms (min-max)':>28s} {'simulated ms':>13s} "
              f"{'error':>7s}")
        for name, kind, flag in jobs:
            runs = measured[(ratio, name)]
            step = spread([r[0] for r in runs])
            exposed = spread([r[1] for r in runs])
            predicted = spread([r[2] for r in runs])[0]
            error = (predicted - step[0]) / step[0]
            if abs(error) > 0.10:
                rows.failures.append(f"{name} at {ratio:g}F: simulated {error:+.1%} off")
            print(f"{name:20s} {step[0]:9.1f} ({step[1]:7.1f}-{step[2]:7.1f}) {exposed[0]:11.1f} "
                  f"({exposed[1]:6.1f}-{exposed[2]:6.1f}) {predicted:13.1f} {error:+7.1%}")

        def ratio_row(label, num, den, field, target=None):
            if (ratio, num) not in measured or (ratio, den) not in measured:
                return
            rows.row(label, [r[field] for r in measured[(ratio, num)]], [r[field] for r in measured[(ratio, den)]],
                     target, where=f" at {ratio:g}F")

        print("ratios (medians; apart: the repetitions' ranges do not overlap)")
        one_to_one = ratio == 1
        exposed_target = {16: 0.4, 32: 0.25}.get(a_m, None) if one_to_one else None
        ratio_row("dualpipev phases / off, exposed a2a", "dualpipev", "dualpipev off", 1, exposed_target)
        ratio_row("dualpipev phases / off, step", "dualpipev", "dualpipev off", 0, 0.8 if one_to_one else 1.0)
        ratio_row("dualpipev threads / off, exposed a2a", "dualpipev threads", "dualpipev off", 1)
        ratio_row("dualpipev threads / off, step", "dualpipev threads", "dualpipev off", 0)
        ratio_row("dualpipev phases / threads, step", "dualpipev", "dualpipev threads", 0)
        ratio_row("dualpipe phases / off, exposed a2a", "dualpipe", "dualpipe off", 1)
        ratio_row("dualpipe phases / off, step", "dualpipe", "dualpipe off", 0, 1.0)
        ratio_row("dualpipe threads / off, step", "dualpipe threads", "dualpipe off", 0)
        ratio_row("dualpipe phases / threads, step", "dualpipe", "dualpipe threads", 0)
        ratio_row("dualpipe / 1f1b, step", "dualpipe", "1f1b", 0, 1 / 1.2 if one_to_one else 1.0)
        ratio_row("dualpipe / zb-h1, step", "dualpipe", "zb-h1", 0)
        ratio_row("dualpipev / zbv, step", "dualpipev", "zbv", 0)
        ratio_row("combined-1f1b / off, exposed a2a", "combined-1f1b", "combined-1f1b off", 1)
        ratio_row("dualpipev / combined-1f1b, step", "dualpipev", "combined-1f1b", 0)
        ratio_row("dualpipev / combined-1f1b, exposed a2a", "dualpipev", "combined-1f1b", 1)
    rows.summary()


if __name__ == "__main__":
    main()
