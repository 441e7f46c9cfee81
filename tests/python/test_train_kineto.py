"""`dualpipe train --kineto-trace` writes PyTorch's own profiler traces, one per rank, which `dualpipe profile` and
`plan --from-kineto` read. Checked against the trace files read here with json alone: the costs are the means of
the trainer's action regions, the measured step the slowest rank's median ProfilerStep, the update the least of the
ranks' medians, and the plan names the schedule that ran."""
import json
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "layout"


@pytest.fixture(scope="module")
def traced(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("train_kineto") / "traces"
    command = [request.config.getoption("--dualpipe"), "train", "-r", "2", "--schedule", "dualpipe", "--steps", "4",
               "--kineto-steps", "2", "--kineto-trace", str(out), "--trace", "", "--eval-every", "0",
               "--sample-tokens", "0", "--timeout", "120"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"profiler traces: {out}/rank0.pt.trace.json" in done.stdout
    return out


def regions(path):
    """Each user annotation's durations (microseconds), by name: the regions as torch.profiler wrote them."""
    found = defaultdict(list)
    for e in json.loads(path.read_text())["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "user_annotation":
            found[e["name"].split("#")[0]].append(e["dur"])
    return found


def per_stage(text, key):
    """One key's values of a --cost string ("F=1:2,B=3:4" -> [1.0, 2.0])."""
    items = dict(item.split("=") for item in text.split(","))
    return [float(v) for v in items[key].split(":")]


def test_each_rank_traced_the_steps_after_step_1(traced):
    files = sorted(traced.iterdir())
    assert [f.name for f in files] == ["rank0.pt.trace.json", "rank1.pt.trace.json"]
    for rank, f in enumerate(files):
        trace = json.loads(f.read_text())
        assert trace["distributedInfo"]["rank"] == rank
        assert trace["dualpipe"]["kind"] == "dualpipe"
        steps = sorted(e["name"] for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#"))
        assert steps == ["ProfilerStep#2", "ProfilerStep#3"]
        # DualPipe over 2 ranks holds both stages on each: every action kind of both.
        assert {"forward stage 0", "forward stage 1", "update"} <= set(regions(f))


def test_the_plan_reads_the_costs_and_the_step_the_traces_hold(dualpipe, traced):
    done = subprocess.run([dualpipe, "plan", "--from-kineto", str(traced), "--format", "json"], capture_output=True,
                          text=True, check=True)
    read = json.loads(done.stdout)["from_kineto"]
    ranks = [regions(traced / f"rank{r}.pt.trace.json") for r in range(2)]
    every = defaultdict(list)
    for rank in ranks:
        for name, durations in rank.items():
            every[name] += durations
    # A stage's F is the mean of its forward regions over both ranks (here S = R: no rescaling per slice), as the
    # two ranks had a core each.
    assert "shared_cores" not in read
    assert per_stage(read["costs_text"], "F") == pytest.approx(
        [statistics.mean(every[f"forward stage {s}"]) for s in range(2)])
    assert per_stage(read["costs_text"], "FB") == pytest.approx(
        [statistics.mean(every["forward_backward stage 0"] + every["forward_backward stage 1"])])
    sources = {s["cost"]: s for s in read["cost_sources"]}
    assert set(sources["F"]["regions"]) == {"forward stage 0", "forward stage 1"}
    assert sources["F"]["occurrences"] == len(every["forward stage 0"]) + len(every["forward stage 1"])
    assert read["schedule"] == "dualpipe"
    assert read["measured_step"] == pytest.approx(max(statistics.median(r["ProfilerStep"]) for r in ranks))
    assert read["update"] == pytest.approx(min(statistics.median(r["update"]) for r in ranks))
    assert read["rank_updates"] == pytest.approx([statistics.median(r["update"]) for r in ranks])
    # Each rank's update after its own last action: the step is the pipeline and at least the least of them, at
    # most the most.
    assert read["simulated_pipeline"] + min(read["rank_updates"]) <= read["simulated_step"] * (1 + 1e-12)
    assert read["simulated_step"] <= (read["simulated_pipeline"] + max(read["rank_updates"])) * (1 + 1e-12)
    assert read["time_unit"] == "us"
    # The table says the same, with which regions made each cost.
    table = subprocess.run([dualpipe, "plan", "--from-kineto", str(traced)], capture_output=True, text=True,
                           check=True).stdout
    assert "traced run: dualpipe, R=2, M=8: measured step" in table
    assert "F = " in table and "mean duration (" in table


def test_profile_reads_the_ranks_and_their_costs_together(dualpipe, traced):
    done = subprocess.run([dualpipe, "profile", "--kineto", str(traced), "--format", "json"], capture_output=True,
                          text=True, check=True)
    report = json.loads(done.stdout)
    assert [r["rank"] for r in report["ranks"]] == [0, 1]
    plan = json.loads(subprocess.run([dualpipe, "plan", "--from-kineto", str(traced), "--format", "json"],
                                     capture_output=True, text=True, check=True).stdout)
    # profile gives the per-stage costs as measured; plan the same per slice, which here (S = R) are the same.
    assert report["costs_text"] == plan["from_kineto"]["costs_text"]


@pytest.mark.parametrize("args, message", [
    (["--steps", "1"], "--kineto-trace profiles the steps after step 1"),
    (["--kineto-steps", "0"], "--kineto-steps must be 1 to 1000, got 0"),
    (["--kineto-trace", "FULL"], "already holds rank0.pt.trace.json: give a new or empty directory"),
])
def test_bad_kineto_options_are_refused_before_the_run(dualpipe, traced, tmp_path, args, message):
    given = {"--kineto-trace": str(tmp_path / "new"), "--steps": "3"}
    given.update(zip(args[::2], [str(traced) if a == "FULL" else a for a in args[1::2]]))
    command = [dualpipe, "train", "-r", "2"] + [x for pair in given.items() for x in pair]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr


def test_layout_calibrates_its_compute_rate_on_the_traces(dualpipe, traced):
    """`layout --calibrate DIR` fits the compute rate to the costs plan --from-kineto reads: F + B of one micro-batch
    through every slice of the ranks that ran."""
    plan = json.loads(subprocess.run([dualpipe, "plan", "--from-kineto", str(traced), "--format", "json"],
                                     capture_output=True, text=True, check=True).stdout)["from_kineto"]
    slices = [f + b for f, b in zip(per_stage(plan["costs_text"], "F"), per_stage(plan["costs_text"], "B"))]
    done = subprocess.run([dualpipe, "layout", "--model", str(EXAMPLES / "small-moe.json"), "--cluster",
                           str(EXAMPLES / "this-machine-x2.json"), "--global-batch", "16", "--top", "1",
                           "--calibrate", str(traced), "--calibrate-mbs", "1", "--format", "json"],
                          capture_output=True, text=True, check=True)
    calibration = json.loads(done.stdout)["calibration"]
    assert calibration["pp"] == 2
    assert calibration["measured_seconds"] == pytest.approx(sum(slices) / 1e6)
    assert 0 < calibration["matmul_efficiency"] <= 1


def test_a_python_dualpipe_run_under_torch_profiler_feeds_the_plan(dualpipe, tmp_path):
    """dualpipe.DualPipeV's actions are regions of the user's own torch.profiler trace (profiled_dualpipev.py): the
    plan reads their 4 stages as costs of 2 slices, each the sum of its two stages' means (S/R = 2 stages a
    slice), read here from the trace files with json."""
    program = Path(__file__).with_name("profiled_dualpipev.py")
    subprocess.run([sys.executable, str(program), str(tmp_path)], check=True, timeout=300)
    every = defaultdict(list)
    for rank in range(2):
        for name, durations in regions(tmp_path / f"rank{rank}.json").items():
            every[name] += durations
    assert {f"forward stage {s}" for s in range(4)} <= set(every)
    done = subprocess.run([dualpipe, "plan", "--from-kineto", str(tmp_path), "-r", "2", "-m", "4", "--format", "json"],
                          capture_output=True, text=True, check=True)
    read = json.loads(done.stdout)["from_kineto"]
    assert "schedule" not in read  # a user's traces name none: R and M are the options'
    mean = {s: statistics.mean(every[f"forward stage {s}"]) for s in range(4)}
    assert per_stage(read["costs_text"], "F") == pytest.approx([mean[0] + mean[1], mean[2] + mean[3]])
    refused = subprocess.run([dualpipe, "plan", "--from-kineto", str(tmp_path), "-r", "8"], capture_output=True,
                             text=True)
    assert refused.returncode == 2
    assert "name 4 stages, fewer than the 8 ranks to plan for" in refused.stderr
