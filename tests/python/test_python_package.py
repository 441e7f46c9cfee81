"""The Python package `dualpipe` beside the `dualpipe` command: the same schedules, simulations, plans, files and
pictures, and errors that name the value and the rule. The command is the reference: its output is read as text
(json, the text form, CSV, SVG), the package's objects are read as Python values, and the two must agree exactly.

Run by ctest (`python.python_package`) with the environment of scripts/setup.sh, which installs the package.
"""
import importlib.metadata
import json
import subprocess

import pytest


def command_json(cli, *args):
    out = subprocess.run([cli, *args, "--format", "json"], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def as_json(name, value):
    """A typed attribute in the json's spelling: actions by their text, placements and metrics field by field, costs
    by their own json, the layer cut as the command writes it. peak_activation_bytes is null in the json where the
    costs have no act_bytes; the struct holds 0 there."""
    if isinstance(value, list):
        return [as_json(name, item) for item in value] if name != "layers_per_stage" else ",".join(map(str, value))
    kind = type(value).__name__
    if kind == "Action":
        return str(value)
    if kind == "Placement":
        fields = {"replicas": value.replicas, "rank_of_stage": value.rank_of_stage}
        return fields if value.replica_of_microbatch is None else {**fields,
                                                                   "replica_of_microbatch": value.replica_of_microbatch}
    if kind == "RankMetrics":
        fields = ["rank", "busy", "idle", "span", "peak_activations", "peak_activation_fraction",
                  "peak_activation_bytes", "stages_held", "parameter_copies"]
        row = {field: getattr(value, field) for field in fields}
        return {**row, "peak_activation_bytes": row["peak_activation_bytes"] or None}
    if kind == "Costs":
        return value.to_dict()
    return value


def assert_typed_fields_are_the_json(value, expected):
    """Every field of the command's json, read through the object's typed attribute of that name."""
    for name, field in expected.items():
        assert as_json(name, getattr(value, name)) == field, name


def command_text(cli, *args):
    # bytes decoded as they are: the CSV's "\r\n" line ends stay
    return subprocess.run([cli, *args], capture_output=True, check=True).stdout.decode()


def test_the_version_is_the_projects_everywhere(dualpipe, package):
    # Written once (CMakeLists.txt's project()): the command, the extension and the installed distribution say it.
    command = subprocess.run([dualpipe, "--version"], check=True, capture_output=True, text=True).stdout.split()
    assert command == ["dualpipe", package.__version__]
    assert importlib.metadata.version("dualpipe") == package.__version__


def test_the_issue_example_matches_the_command_line(dualpipe, package):
    # python3 -c "import dualpipe; print(dualpipe.plan(8, 32, dualpipe.Costs(F=1, B=2, W=1)).makespan)"
    expected = command_json(dualpipe, "plan", "-r", "8", "-m", "32", "--cost", "F=1,B=2,W=1")
    assert package.plan(8, 32, package.Costs(F=1, B=2, W=1)).makespan == expected["makespan"]


PLANS = [
    ((4, 8), {}, []),
    ((8, 32), {"memory_limit": 8}, ["--memory-limit", "8"]),
    ((4, 12), {"memory_limit": 4, "placements": ["linear"]}, ["--memory-limit", "4", "--placements", "linear"]),
    ((4, 8), {"objective": "span", "families_only": True}, ["--objective", "span", "--families-only"]),
    ((4, 8), {"memory_limit": "2GiB"}, ["--memory-limit", "2GiB"]),
]


@pytest.mark.parametrize("sizes,keywords,flags", PLANS, ids=[str(p[1]) for p in PLANS])
def test_plan_has_the_fields_of_plan_json(dualpipe, package, sizes, keywords, flags):
    costs = "F=1,B=2,W=1,FB=2.5,act_bytes=1e9" if keywords.get("memory_limit") == "2GiB" else "F=1,B=2,W=1,FB=2.5"
    expected = command_json(dualpipe, "plan", "-r", str(sizes[0]), "-m", str(sizes[1]), "--cost", costs, *flags)
    plan = package.plan(*sizes, package.Costs.parse(costs), **keywords)
    assert plan.to_dict() == expected
    assert_typed_fields_are_the_json(plan, expected)
    text_args = ["plan", "-r", str(sizes[0]), "-m", str(sizes[1]), "--cost", costs, *flags]
    assert plan.to_text() == command_text(dualpipe, *text_args, "--format", "text")
    assert plan.to_csv() == command_text(dualpipe, *text_args, "--format", "csv")
    best = plan.candidates[0]
    assert isinstance(best, package.PlanCandidate) and (best.name, best.makespan) == (plan.kind, plan.makespan)
    assert best.schedule.to_text() == plan.schedule.to_text() and best.per_rank[0].busy == plan.per_rank[0].busy


# An uneven model: an embedding layer that keeps more activations, eight blocks, a heavier head.
LAYERS = [(0.5, 1, 0.5, 3e6)] + [(1, 2, 1, 1e6)] * 8 + [(2, 4, 2, 2e6)]


@pytest.mark.parametrize("flags", [["--placements", "linear", "--memory-limit", "30MB"], ["--memory-limit", "6"]])
def test_plan_with_layer_costs_is_the_commands(dualpipe, package, tmp_path, flags):
    table = tmp_path / "layers.txt"
    table.write_text("F B W act_bytes\n" + "".join(" ".join(str(v) for v in row) + "\n" for row in LAYERS))
    expected = command_json(dualpipe, "plan", "-r", "4", "-m", "8", "--cost", "comm=0.1", "--layer-costs",
                            str(table), *flags)
    keywords = {"placements": ["linear"]} if "linear" in flags else {}
    limit = flags[flags.index("--memory-limit") + 1]
    for layers in (LAYERS, str(table)):
        plan = package.plan(4, 8, package.Costs(comm=0.1), memory_limit=limit if "MB" in limit else float(limit),
                            layer_costs=layers, **keywords)
        assert plan.to_dict() == expected
        assert_typed_fields_are_the_json(plan, expected)
        assert sum(plan.layers_per_stage) == len(LAYERS) and len(plan.layers_per_stage) == plan.stages


def kinds_at(package, ranks, microbatches):
    # chimera, interleaved and combined 1F1B need M a multiple of R
    return [name for name, _, _ in package.kinds()
            if not (name in ("chimera", "interleaved-1f1b", "combined-1f1b") and microbatches % ranks)]


@pytest.mark.parametrize("ranks,microbatches", [(2, 4), (4, 8), (4, 10), (8, 16)])
def test_every_kind_has_the_fields_and_forms_of_the_command(dualpipe, package, ranks, microbatches):
    sizes = ["-r", str(ranks), "-m", str(microbatches)]
    for kind in kinds_at(package, ranks, microbatches):
        schedule = package.schedule(kind, ranks, microbatches)
        expected = command_json(dualpipe, "schedule", "--kind", kind, *sizes)
        assert schedule.to_dict() == expected, kind
        assert_typed_fields_are_the_json(schedule, expected)
        assert (schedule.kind, schedule.ranks, schedule.microbatches) == (kind, ranks, microbatches)
        assert schedule.to_text() == command_text(dualpipe, "schedule", "--kind", kind, *sizes), kind
        assert schedule.to_csv() == command_text(dualpipe, "schedule", "--kind", kind, *sizes, "--format", "csv")
        lowered = command_text(dualpipe, "schedule", "--kind", kind, *sizes, "--lower")
        assert schedule.lower().to_text() == lowered, kind


COSTS = ["F=1,B=2,W=1", "F=1,B=2,W=1,FB=2.5,comm=0.25", "F=1,B=2,W=0.5,a2a=0.75,w_mem=0.5",
         "F=1,B=2,W=1,recompute=1,act_bytes=3e6", "F=1,B=2,W=1,a2a=2,layers=2,pair=threads"]


@pytest.mark.parametrize("costs", COSTS)
def test_simulation_has_the_fields_of_simulate_json(dualpipe, package, costs):
    for kind in kinds_at(package, 4, 8):
        expected = command_json(dualpipe, "simulate", "--kind", kind, "-r", "4", "-m", "8", "--cost", costs)
        got = package.simulate(package.schedule(kind, 4, 8), package.Costs.parse(costs))
        assert got.to_dict() == expected, kind
        assert_typed_fields_are_the_json(got, expected)


def test_costs_from_keywords_are_the_costs_of_the_text(package):
    keywords = package.Costs(F=[1, 2, 1.5, 1], B=[2, 4, 3, 2], W=[1, 2, 1.5, 1], FB=2.75, comm=0.125, a2a=0.5,
                             pair="threads", act_scale=[2, 1, 1, 1], w_mem=0.5, recompute=True, input_mem=0.1)
    text = package.Costs.parse("F=1:2:1.5:1,B=2:4:3:2,W=1:2:1.5:1,FB=2.75,comm=0.125,a2a=0.5,pair=threads,"
                               "act_scale=2:1:1:1,w_mem=0.5,recompute=1,input_mem=0.1")
    assert keywords.to_dict() == text.to_dict()
    assert keywords.F == [1, 2, 1.5, 1] and keywords.recompute is True and keywords.pair == "threads"
    with pytest.raises(TypeError, match="not a string"):
        package.Costs(F="1")
    # 0.1 is not exact in binary: the keyword reaches the model as the same double Python holds
    assert package.Costs(comm=0.1).comm == 0.1


def test_simulated_times_are_the_timeline_of_the_picture(package):
    simulation = package.simulate(package.schedule("1f1b", 2, 2), package.Costs(F=1, B=2, W=1))
    # 1F1B, R=2, M=2, worked by hand: rank 1 runs 1F0 at 1-2 (after 0F0), 1B0 at 2-4, 1F1 at 4-5, 1B1 at 5-7;
    # rank 0 runs 0F0 and 0F1, then 0B0 once 1B0 ends (4-6), 0B1 once 1B1 ends (7-9)
    assert simulation.times[0] == [("0F0", 0, 1), ("0F1", 1, 2), ("0B0", 4, 6), ("0B1", 7, 9)]
    assert simulation.times[1] == [("1F0", 1, 2), ("1B0", 2, 4), ("1F1", 4, 5), ("1B1", 5, 7)]


def test_typed_metrics_and_the_numpy_timeline_are_the_hand_worked_step(package):
    """The same step as above, through the types bound from the simulator's structs."""
    import numpy
    simulation = package.simulate(package.schedule("1f1b", 2, 2), package.Costs(F=1, B=2, W=1))
    assert all(t.dtype == numpy.float64 and t.shape == (4, 2) for t in simulation.timeline)
    assert [t.tolist() for t in simulation.timeline] == [[[0, 1], [1, 2], [4, 6], [7, 9]],
                                                         [[1, 2], [2, 4], [4, 5], [5, 7]]]
    metrics = simulation.metrics
    assert isinstance(metrics, package.Metrics) and isinstance(metrics.per_rank[0], package.RankMetrics)
    # Each rank computes F + F + B + B = 6 of the step's 9; rank 1 spans 1 to 7.
    assert (metrics.makespan, metrics.bubble) == (9, 3)
    assert [(r.rank, r.busy, r.idle, r.span) for r in metrics.per_rank] == [(0, 6, 3, 9), (1, 6, 3, 6)]
    assert metrics.makespan == simulation.makespan and metrics.bubble_rate == simulation.bubble_rate


@pytest.mark.parametrize("kind,suffix", [("dualpipe", "svg"), ("zbv", "html")])
def test_draw_writes_the_picture_of_dualpipe_draw(dualpipe, package, tmp_path, kind, suffix):
    theirs, ours = tmp_path / f"cli.{suffix}", tmp_path / f"py.{suffix}"
    costs = "F=1,B=2,W=1,FB=2.5"
    command_text(dualpipe, "draw", "--kind", kind, "-r", "4", "-m", "8", "--cost", costs, "-o", str(theirs))
    package.schedule(kind, 4, 8).draw(str(ours), package.Costs.parse(costs))
    assert ours.read_bytes() == theirs.read_bytes()
    simulated = tmp_path / f"simulated.{suffix}"
    package.simulate(package.schedule(kind, 4, 8), package.Costs.parse(costs)).draw(str(simulated))
    assert simulated.read_bytes() == theirs.read_bytes()


def test_a_plan_file_reads_back_with_its_figures(dualpipe, package, tmp_path):
    plan = package.plan(4, 8, package.Costs(F=1, B=2, W=1), memory_limit=4)
    path = tmp_path / "plan.txt"
    path.write_text(plan.to_text())
    assert package.read_schedule(str(path)).actions == plan.actions
    # the command reads the plan file's costs from its header and reproduces the plan's figures
    assert command_json(dualpipe, "simulate", "--from", str(path))["makespan"] == plan.makespan


BAD_INPUT = [
    (lambda dp: dp.schedule("dualpip", 4, 8), "unknown schedule kind 'dualpip' \\(did you mean 'dualpipe'"),
    (lambda dp: dp.schedule("chimera", 4, 6), "M=6"),
    (lambda dp: dp.schedule("1f1b", 0, 8), "R"),
    (lambda dp: dp.Costs(W=3), "0 <= W <= B, got W=3 with B=2"),
    (lambda dp: dp.Costs(Q=1), "unknown cost key 'Q'"),
    (lambda dp: dp.Costs(F=-1), "F"),
    (lambda dp: dp.simulate(dp.schedule("1f1b", 4, 8), dp.Costs(scale=[1, 2])), "cost scale has 2 values"),
    (lambda dp: dp.plan(4, 8, memory_limit=0.5), "memory limit 0.5 is below the feasible minimum of 1"),
    (lambda dp: dp.plan(4, 8, memory_limit="2GiB"), "act_bytes"),
    (lambda dp: dp.plan(4, 8, objective="fastest"), "objective 'fastest'"),
    (lambda dp: dp.plan(4, 8, placements=["diagonal"]), "unknown placement 'diagonal'"),
    (lambda dp: dp.plan(4, 8, dp.Costs(scale=[1, 2])), "cost scale has 2 values"),
    (lambda dp: dp.schedule("1f1b", 4, 8, max_memory="lots"), "max_memory"),
    (lambda dp: dp.schedule("1f1b", 4, 8).draw("/tmp/picture.png"), "must end in .svg or .html"),
    (lambda dp: dp.plan(4, 8, dp.Costs(F=2), layer_costs=LAYERS), "leave F, B, W, scale and act_scale out"),
    (lambda dp: dp.plan(4, 8, layer_costs=LAYERS[:2] + [(1, 2, 3, 0)]), "layer_costs:3"),
    (lambda dp: dp.read_schedule("/nonexistent/schedule.txt"), "/nonexistent/schedule.txt"),
]


@pytest.mark.parametrize("call,rule", BAD_INPUT, ids=[b[1][:30] for b in BAD_INPUT])
def test_bad_input_raises_value_error_naming_the_rule(package, call, rule):
    with pytest.raises(ValueError, match=rule):
        call(package)


def test_a_string_cost_is_a_type_error(package):
    with pytest.raises(TypeError, match="Costs\\(F=...\\): a number or a list of numbers"):
        package.Costs(F="1")


def test_a_missing_field_names_itself(package):
    with pytest.raises(AttributeError, match="makespan"):
        package.schedule("1f1b", 4, 8).makespan
    assert "makespan" in dir(package.plan(4, 8))


def test_actions_and_placement_are_dualpipes_as_the_paper_places_them(package):
    """DualPipe (arXiv:2412.19437, fig. 5): R ranks, stage s on rank s for the first half of the micro-batches and on
    rank R-1-s for the second; a rank's overlapped pair runs one direction's forward with the other's backward."""
    ranks, microbatches = 4, 8
    s = package.schedule("dualpipe", ranks, microbatches)
    assert s.placement.replicas == 2
    assert s.placement.rank_of_stage == [[0, 1, 2, 3], [3, 2, 1, 0]]
    assert s.placement.replica_of_microbatch == [0] * 4 + [1] * 4
    assert [s.placement.rank(1, m) for m in (0, 7)] == [1, 2]
    pair = next(a for a in s.actions[0] if a.type == "OVERLAP_F_B")
    assert (str(pair), pair.stage, pair.microbatch, pair.backward_stage, pair.backward_microbatch, pair.peer) == (
        "(0F3;3B5)", 0, 3, 3, 5, None)
    assert s.placement.rank(pair.backward_stage, pair.backward_microbatch) == 0  # both halves on rank 0
    # The lowering's sends go to the rank of the next stage in the micro-batch's direction.
    for rank, actions in enumerate(s.lower().actions):
        for a in actions:
            if a.type == "SEND_F":
                assert a.peer == s.placement.rank(a.stage + 1, a.microbatch) != rank, str(a)
    assert package.schedule("1f1b", 2, 2).placement.replica_of_microbatch is None
    with pytest.raises(ValueError, match="stage 4 is not one of the 4 stages"):
        s.placement.rank(4, 0)
    with pytest.raises(ValueError, match="micro-batch 8"):
        s.placement.rank(0, 8)


def stub_names():
    """Top-level names of dualpipe/_core.pyi, and each class's annotated fields and methods."""
    import ast
    import pathlib

    import dualpipe
    tree = ast.parse((pathlib.Path(dualpipe.__file__).parent / "_core.pyi").read_text())
    top, members = set(), {}
    for node in tree.body:
        if not isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            continue  # the stubs' imports
        if not node.name.startswith("_"):  # a stub-only base class is not a name of the module
            top.add(node.name)
        if isinstance(node, ast.ClassDef):
            own = {n.target.id if isinstance(n, ast.AnnAssign) else n.name for n in node.body
                   if isinstance(n, (ast.AnnAssign, ast.FunctionDef))}
            members[node.name] = own.union(*(members[base.id] for base in node.bases))
    return top, members


def test_the_type_stubs_name_every_function_method_and_field(package):
    top, members = stub_names()
    public = {name for name in dir(package._core) if not name.startswith("_")}
    assert top == public
    examples = {
        "Costs": package.Costs(),
        "Schedule": package.schedule("dualpipe", 4, 8),
        "Simulation": package.simulate(package.schedule("zbv", 4, 8)),
        "Plan": package.plan(4, 8, memory_limit=4, placements=["linear"], layer_costs=[(1, 2, 1, 1e6)] * 8),
    }
    examples["PlanCandidate"] = examples["Plan"].candidates[0]
    examples["Action"] = examples["Schedule"].actions[0][0]
    examples["Placement"] = examples["Schedule"].placement
    for name, value in examples.items():
        methods = {m for m in dir(type(value)) if not m.startswith("_")}
        fields = set(value.to_dict()) if name == "Costs" else set()
        assert methods | fields | {"__init__", "__len__"} >= members[name] - {"__init__", "__len__"}, name
        assert members[name] >= methods | fields, f"{name}: not in the stubs: {(methods | fields) - members[name]}"


def test_a_schedule_reads_back_from_its_text_equal(package):
    # Results compare by their fields: a schedule read back from its own text form is the same schedule, another
    # kind is not, and two simulations of the same inputs are equal.
    s = package.schedule("dualpipev", 4, 8)
    assert package.Schedule.from_text(s.to_text()).to_text() == s.to_text()
    assert package.Schedule.from_text(s.to_text()) == package.Schedule.from_text(s.to_text())
    assert s != package.schedule("zbv", 4, 8)
    assert package.simulate(s) == package.simulate(s)
    with pytest.raises(ValueError, match="rank 0"):
        package.Schedule.from_text("rank 0: 0F0\n")  # no backward: the validator names what is missing
