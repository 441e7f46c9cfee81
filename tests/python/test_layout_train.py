"""`dualpipe layout` prints, for the layouts the trainer can run here, the `dualpipe train` command that runs them:
the command must run, and run the layout of its row (the trainer's own record of its configuration)."""
import json
import os
import shlex
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples", "layout")


def layout_rows(dualpipe, cluster, *extra):
    out = subprocess.run([dualpipe, "layout", "--model", os.path.join(EXAMPLES, "small-moe.json"),
                          "--cluster", os.path.join(EXAMPLES, cluster), "--global-batch", "32", "--format", "json",
                          *extra], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["rows"]


def test_only_layouts_the_trainer_runs_get_a_command(dualpipe):
    rows = layout_rows(dualpipe, "this-machine-x4.json", "--top", "400")
    with_command = [r for r in rows if r["train_command"]]
    assert with_command and len(with_command) < len(rows)
    for r in rows:
        # The example model is MoE: the trainer recomputes beside tensor and expert parallelism only without the
        # forward-backward overlap, splits no sequence over both tp (with --sp) and cp, and shards experts over
        # data-parallel replicas only (the planner's ep may span cp ranks too: those commands would be refused);
        # its 4 heads, 128 tokens and 256 bytes divide by every tp and 2 x cp of this machine; every ZeRO stage runs.
        runnable = (r["recompute"] != "selective" and (r["tp"] == 1 or r["cp"] == 1)
                    and not (r["tp"] > 1 and r["ep"] > 1 and r["recompute"] == "full") and r["dp"] % r["ep"] == 0)
        assert (r["train_command"] is not None) == runnable, r


def test_a_printed_command_trains_its_layout(dualpipe, tmp_path):
    # An expert-parallel layout of 4 ranks over 2 replicas, so every size of the command is checked.
    rows = layout_rows(dualpipe, "this-machine-x4.json", "--fix", "pp=2,dp=2,ep=2,schedule=dualpipev,zero=1,mbs=2")
    row = rows[0]
    command = shlex.split(row["train_command"])
    assert command[0] == "dualpipe"
    metrics = tmp_path / "run.jsonl"
    done = subprocess.run([os.path.abspath(dualpipe)] + command[1:] + ["--steps", "2", "--eval-every", "0", "--sample-tokens", "0",
                                                      "--metrics", str(metrics), "--trace", "", "--timeout", "120"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    config = next(r for r in records if r["type"] == "config")
    assert (config["ranks"], config["dp"], config["ep"], config["kind"]) == (row["pp"], row["dp"], row["ep"],
                                                                             row["schedule"])
    assert (config["microbatches"], config["batch"], config["zero"]) == (row["microbatches"], row["micro_batch_size"],
                                                                         row["zero"])
    model = json.load(open(os.path.join(EXAMPLES, "small-moe.json")))
    assert (config["layers"], config["hidden"], config["heads"], config["seq_len"], config["experts"],
            config["top_k"]) == (model["layers"], model["hidden"], model["heads"], model["seq_len"],
                                 model["experts"], model["top_k"])
    # The global batch of the plan: dp x micro-batches x micro-batch size sequences per step.
    assert row["dp"] * row["microbatches"] * row["micro_batch_size"] == 32
    steps = [r for r in records if r["type"] == "step"]
    assert len(steps) == 2 and all(r["loss"] > 0 for r in steps)
