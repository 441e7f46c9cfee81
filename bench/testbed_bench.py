"""What the test-bed benchmarks share (bench_fb_overlap.py, bench_emulated_device.py): running the script again
inside a test bed, one training job across its nodes, and the statistics of repeated, interleaved runs."""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTBED = os.path.join(ROOT, "scripts", "testbed.sh")


def benchmark_arguments(doc, microbatches, rate_help):
    """The options both benchmarks take: repetitions, steps per job, micro-batches, the links' rate, the binary."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--steps", type=int, default=12, help="steps per job; the median of steps 3.. is taken")
    parser.add_argument("-m", type=int, default=microbatches, help="micro-batches per step and replica")
    parser.add_argument("--rate", default="100mbit", help=rate_help)
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "dualpipe"))
    return parser


def run_inside_testbed(name, nodes, rate, burst=None, mtu=None):
    """Returns when this process runs inside a test bed; else runs this script again inside one of `nodes` nodes
    and exits with its status (77 where the test bed cannot be made)."""
    if "TESTBED_NODES" in os.environ:
        return
    check = subprocess.run([TESTBED, "check"], capture_output=True, text=True)
    if check.returncode != 0:
        print(check.stdout + check.stderr, end="")
        sys.exit(77)
    command = [TESTBED, "run", name, "--nodes", str(nodes), "--rate", rate]
    if burst:
        command += ["--burst", str(burst)]
    if mtu:
        command += ["--mtu", str(mtu)]
    sys.exit(subprocess.run(command + ["--", sys.executable, *sys.argv]).returncode)


def run_job(binary, name, train_args, workdir, trace=""):
    """`dualpipe train TRAIN_ARGS` with one launcher per test-bed node (node k on TESTBED_NODEk, --node-rank k);
    node 0 writes the metrics (and the trace, if any). Returns the step records of the metrics. Exits naming the
    job and the node where one fails."""
    nodes = int(os.environ["TESTBED_NODES"])
    metrics = os.path.join(workdir, "metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    procs = []
    for node in range(nodes):
        extra = ["--metrics", metrics, "--trace", trace] if node == 0 else ["--trace", ""]
        log = open(os.path.join(workdir, f"node{node}.log"), "w")
        procs.append((subprocess.Popen(["ip", "netns", "exec", os.environ[f"TESTBED_NODE{node}"], binary, "train",
                                        *train_args, "--nnodes", str(nodes), "--master-addr",
                                        os.environ["TESTBED_ADDR0"], "--node-rank", str(node), *extra],
                                       stdout=log, stderr=subprocess.STDOUT), log))
    failed = []
    for node, (p, log) in enumerate(procs):
        if p.wait(timeout=1800) != 0:
            failed.append(node)
        log.close()
    if failed:
        with open(os.path.join(workdir, f"node{failed[0]}.log")) as f:
            sys.exit(f"{name} failed on node {failed[0]}:\n{f.read()[-3000:]}")
    with open(metrics) as f:
        return [r for r in map(json.loads, f) if r.get("type") == "step"]


def median_from_step(steps, field, first=3):
    """The median of `field` over steps `first`.. (the first steps warm up)."""
    return statistics.median(s[field] for s in steps if s["step"] >= first)


def spread(values):
    """(median, min, max) of one figure's repetitions."""
    return statistics.median(values), min(values), max(values)


def apart(x, y):
    """Whether two figures' ranges over the repetitions do not overlap: a difference larger than the spread."""
    return max(x) < min(y) or max(y) < min(x)


class RatioRows:
    """Prints ratios of medians with whether the ranges are apart, checks targets, and collects the misses."""

    def __init__(self):
        self.failures = []

    def row(self, label, x, y, target=None, at_most=True, where=""):
        value = statistics.median(x) / statistics.median(y)
        verdict = ""
        if target is not None:
            ok = value <= target if at_most else value >= target
            verdict = f"target {'<=' if at_most else '>='} {target:g}: {'met' if ok else 'MISSED'}"
            if not ok:
                self.failures.append(f"{label}{where}: x{value:.3f}, {verdict}")
        print(f"  {label:44s} x{value:.3f}  apart: {'yes' if apart(x, y) else 'no '}  {verdict}")

    def summary(self):
        print("\nsummary: " + ("every target met" if not self.failures else "; ".join(self.failures)))
