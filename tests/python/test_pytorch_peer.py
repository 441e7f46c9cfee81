"""Our schedules beside PyTorch's own: torch.distributed.pipelining, run side by side in one process.

- Where PyTorch implements the same schedule (GPipe, interleaved 1F1B, ZBV, DualPipeV), its generator and ours
  give the same per-rank order, action for action.
- Every schedule we can export to PyTorch's compute-only CSV (every one-direction kind, and `dualpipe plan`'s
  outputs) passes PyTorch's own validator, and PyTorch's own lowering and simulator run it to the end, so its
  `_PipelineScheduleRuntime` can load it.

Run by ctest (`pytorch_peer`) with the PyTorch of scripts/setup.sh: python -m pytest tests/python --dualpipe BIN.
"""
import subprocess

import pytest

schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
import pytorch_runtime  # noqa: E402 (needs torch, checked above)


class MockStage:
    """What PyTorch's schedule classes read from a stage to build their order: no module, no process group."""

    def __init__(self, stage_index, num_stages, group_size, group_rank):
        self.stage_index = stage_index
        self.num_stages = num_stages
        self.group_size = group_size
        self.group_rank = group_rank
        self.is_first = stage_index == 0
        self.is_last = stage_index == num_stages - 1
        self.submod = None
        self.stage_index_to_group_rank = {}


def pytorch_order(schedule_class, ranks, microbatches, placement):
    """PyTorch's per-rank compute order, as action strings (its REDUCE_GRAD bookkeeping left out)."""
    stages_per_rank = 1 if placement == "linear" else 2
    num_stages = ranks * stages_per_rank
    order = {}
    for rank in range(ranks):
        if placement == "v":
            indices = [rank, 2 * ranks - 1 - rank]
        elif placement == "looped":
            indices = [rank + k * ranks for k in range(stages_per_rank)]
        else:
            indices = [rank]
        stages = [MockStage(i, num_stages, ranks, rank) for i in indices]
        single = issubclass(schedule_class, schedules.PipelineScheduleSingle)
        schedule = schedule_class(stages[0] if single else stages, microbatches)
        order[rank] = [str(a) for a in schedule.pipeline_order[rank] if a is not None and "REDUCE_GRAD" not in str(a)]
    return order


def our_csv(dualpipe, *args):
    return subprocess.run([dualpipe, *args, "--format", "csv"], capture_output=True, text=True, check=True).stdout


def rows_of(csv_text):
    return {rank: [a for a in row.split(",") if a] for rank, row in enumerate(csv_text.rstrip("\n").split("\n"))}


# (our kind, PyTorch's class, placement, sizes where both generate it). Interleaved 1F1B at M = R is left out:
# both are valid there but order the warm-up differently. PyTorch's Schedule1F1B is left out: its pipeline_order
# for the last rank numbers forwards from 1 (it is only used for printing; its runtime steps differently).
SAME_SCHEDULES = [
    ("gpipe", "ScheduleGPipe", "linear", [(2, 2), (4, 8), (8, 16), (8, 24)]),
    ("interleaved-1f1b", "ScheduleInterleaved1F1B", "looped", [(2, 4), (4, 8), (4, 16), (8, 16), (8, 32)]),
    ("zbv", "ScheduleZBVZeroBubble", "v", [(2, 4), (2, 6), (4, 8), (4, 10), (8, 16), (8, 18), (8, 32)]),
    ("dualpipev", "ScheduleDualPipeV", "v", [(2, 4), (2, 6), (4, 8), (4, 10), (8, 16), (8, 18), (8, 32)]),
]


@pytest.mark.parametrize("kind,class_name,placement,sizes", SAME_SCHEDULES, ids=[s[0] for s in SAME_SCHEDULES])
def test_same_order_as_pytorchs_own_generator(dualpipe, kind, class_name, placement, sizes):
    for ranks, microbatches in sizes:
        theirs = pytorch_order(getattr(schedules, class_name), ranks, microbatches, placement)
        ours = rows_of(our_csv(dualpipe, "schedule", "--kind", kind, "-r", str(ranks), "-m", str(microbatches)))
        for rank in range(ranks):
            assert ours[rank] == theirs[rank], f"{kind} R={ranks} M={microbatches} rank {rank}"


def stage_to_rank_of(rows):
    """The placement the CSV implies: each stage runs on the one rank whose row holds its actions."""
    owner = {}
    for rank, actions in rows.items():
        for text in actions:
            action = schedules._Action.from_str(text)
            halves = action.sub_actions if action.sub_actions else [action]
            for half in halves:
                assert owner.setdefault(half.stage_index, rank) == rank, f"stage {half.stage_index} on two ranks"
    return owner


EXPORTED = [
    ["schedule", "--kind", kind, "-r", str(r), "-m", str(m)]
    for kind in ["gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zbv", "dualpipev"]
    for r, m in [(2, 4), (4, 8), (4, 12)]
] + [
    ["plan", "-r", "4", "-m", "8", "--placements", placement, "--memory-limit", "4"]
    for placement in ["linear", "v"]
] + [["plan", "-r", "4", "-m", "8", "--cost", "F=1,B=2,W=1,FB=2.2", "--placements", "v"]]


def check_with_pytorch(actions):
    """PyTorch's validator, lowering and simulator run the schedule {rank: [_Action]} to its end."""
    ranks = len(actions)
    owner = pytorch_runtime.stage_owners(actions)
    num_stages = len(owner)
    microbatches = 1 + max(
        half.microbatch_index
        for row in actions.values()
        for a in row
        for half in (a.sub_actions or [a])
    )
    schedules._validate_schedule(actions, ranks, num_stages, microbatches)
    # PyTorch's lowering and simulator take no overlapped pair (its own ScheduleDualPipeV's order fails them the
    # same way): a pair runs as its forward, then its backward.
    sequential = {rank: [half for a in row for half in (a.sub_actions or [a])] for rank, row in actions.items()}
    with_comms = schedules._add_send_recv(sequential, stage_to_rank=lambda s: owner[s], num_stages=num_stages)
    # PyTorch's simulator raises when the schedule cannot finish (a receive that no send ever feeds).
    schedules._simulate_comms_compute(with_comms, stage_to_rank=lambda s: owner[s], num_stages=num_stages)


@pytest.mark.parametrize("args", EXPORTED, ids=["-".join(a[1:]) for a in EXPORTED])
def test_pytorch_validates_lowers_and_simulates_our_export(dualpipe, args):
    rows = rows_of(our_csv(dualpipe, *args))
    stage_to_rank_of(rows)  # each stage on one rank
    check_with_pytorch({rank: [schedules._Action.from_str(a) for a in row] for rank, row in rows.items()})


# PyTorch's own runtime trains with our schedules: one step on one Gloo process per rank, over a transformer layer
# per stage, gives the gradients of one process running the whole model. Here from the CSV file the runtime loads
# itself (torchtitan's way); the kinds the issue names run below from the Python package's actions, which equal
# PyTorch's reading of these CSV files (test_our_actions_are_pytorchs_reading_of_our_csv).
RUN_BY_PYTORCH = [["schedule", "--kind", "1f1b", "-r", "4", "-m", "8"],
                  ["plan", "-r", "4", "-m", "8", "--placements", "v", "--memory-limit", "4"]]


@pytest.mark.parametrize("args", RUN_BY_PYTORCH, ids=["-".join(a[1:4]) for a in RUN_BY_PYTORCH])
def test_pytorchs_runtime_trains_our_schedule_like_one_process(dualpipe, tmp_path, args):
    import torch

    path = tmp_path / "schedule.csv"
    path.write_text(our_csv(dualpipe, *args))
    got = pytorch_runtime.pipeline_gradients(str(path), 8)
    expected = pytorch_runtime.single_process_gradients(len(got), 8)
    for stage, (g, e) in enumerate(zip(got, expected)):
        for name in e:
            # float32 sums in another order: a few units in the last place, relative to the tensor's largest entry
            scale = e[name].abs().max().item()
            assert torch.allclose(g[name], e[name], rtol=0, atol=1e-5 * scale), f"stage {stage} {name}"


# The same schedules through the Python package: handed to PyTorch as its own action objects, no file between.
ONE_DIRECTION = [(kind, r, m) for kind in ["gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zbv", "dualpipev"]
                 for r, m in [(2, 4), (4, 8), (4, 12)]]


@pytest.mark.parametrize("kind,ranks,microbatches", ONE_DIRECTION, ids=[f"{k}-{r}-{m}" for k, r, m in ONE_DIRECTION])
def test_our_actions_are_pytorchs_reading_of_our_csv(dualpipe, package, kind, ranks, microbatches):
    ours = package.schedule(kind, ranks, microbatches).to_pytorch()
    rows = rows_of(our_csv(dualpipe, "schedule", "--kind", kind, "-r", str(ranks), "-m", str(microbatches)))
    assert ours == {rank: [schedules._Action.from_str(a) for a in row] for rank, row in rows.items()}


def test_each_action_type_maps_to_pytorchs(package):
    types = schedules._ComputationType
    kinds_of = lambda schedule: {a.computation_type for row in schedule.to_pytorch().values() for a in row}
    assert kinds_of(package.schedule("zb-h1", 4, 8)) == {types.FORWARD, types.BACKWARD_INPUT, types.BACKWARD_WEIGHT}
    assert kinds_of(package.schedule("1f1b", 4, 8)) == {types.FORWARD, types.FULL_BACKWARD}
    pairs = [a for row in package.schedule("dualpipev", 4, 10).to_pytorch().values() for a in row
             if a.computation_type == types.OVERLAP_F_B]
    assert pairs and all([h.computation_type for h in a.sub_actions] == [types.FORWARD, types.FULL_BACKWARD]
                         for a in pairs)
    assert str(pairs[0]) == "(" + ";".join(str(h) for h in pairs[0].sub_actions) + ")OVERLAP_F_B"


@pytest.mark.parametrize("kind", ["dualpipe", "chimera"])
def test_a_stage_on_two_ranks_is_refused_naming_it(package, kind):
    schedule = package.schedule(kind, 4, 8)
    for export in (schedule.to_pytorch, schedule.to_pytorch_csv):
        with pytest.raises(ValueError, match=f"{kind} places stage 0 on ranks 0 and 3 .*two-direction"):
            export()


def python_schedule(package, name):
    if name == "plan":
        return package.plan(4, 8, package.Costs(F=1, B=2, W=1), memory_limit=4, placements=["v"]).schedule
    return package.schedule(name, 4, 8)


RUN_FROM_PYTHON = ["dualpipev", "zb-h1", "zbv", "interleaved-1f1b", "plan"]


@pytest.mark.parametrize("name", RUN_FROM_PYTHON)
def test_pytorch_validates_lowers_and_simulates_our_actions(package, name):
    check_with_pytorch(python_schedule(package, name).to_pytorch())


@pytest.mark.parametrize("name", RUN_FROM_PYTHON)
def test_pytorchs_runtime_trains_our_actions_like_one_process(package, tmp_path, name):
    import torch

    path = tmp_path / "schedule.txt"
    path.write_text(python_schedule(package, name).to_text())
    got = pytorch_runtime.pipeline_gradients(str(path), 8, loader="dualpipe")
    expected = pytorch_runtime.single_process_gradients(len(got), 8)
    for stage, (g, e) in enumerate(zip(got, expected)):
        for name in e:
            scale = e[name].abs().max().item()
            assert torch.allclose(g[name], e[name], rtol=0, atol=1e-5 * scale), f"stage {stage} {name}"
