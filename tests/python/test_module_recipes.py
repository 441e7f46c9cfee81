"""dualpipe.DualPipe and DualPipeV on the modules people write (module_recipes.py): nn.Linear stages split through
the autograd graph, activation checkpointing with the automatic split and with WeightGradStore, torch.compile,
bf16 autocast, and DualPipe's two copies summed with data-parallel replicas; each against one process."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")
RECIPES = os.path.join(os.path.dirname(__file__), "module_recipes.py")


@pytest.mark.parametrize("case", ["linear", "checkpoint", "checkpoint-store", "compile", "autocast", "dp"])
def test_module_recipe_trains_like_one_process(case):
    done = subprocess.run([sys.executable, RECIPES, case], capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{case}: every check passed" in done.stdout
    ranks = 4 if case == "dp" else 2
    for rank in range(ranks):
        assert f"rank {rank}: {case} losses equal" in done.stdout, done.stdout
