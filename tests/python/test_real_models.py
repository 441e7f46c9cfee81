"""Real models (real_models.py: Llama 3 and a DeepSeek-V3-style MoE, cut as torchtitan cuts them) under dualpipe:
DualPipeV against one process, the same with the sequence length changing between steps, and
dualpipe.pytorch.ScheduleDualPipeV against PyTorch's own ScheduleDualPipeV on the same PipelineStages
(real_model_checks.py)."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")
CHECKS = os.path.join(os.path.dirname(__file__), "real_model_checks.py")


@pytest.mark.parametrize("case", ["llama3", "deepseek-v3", "shapes", "schedule"])
def test_real_model_matches_its_reference(case):
    done = subprocess.run([sys.executable, CHECKS, case], capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{case}: every check passed" in done.stdout
    for rank in range(2):
        assert f"rank {rank}: {case} losses equal" in done.stdout, done.stdout
