"""The Python example trains with PyTorch's runtime on our schedules, and its step-1 loss matches one process."""
import pathlib
import re
import subprocess
import sys

import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python" / "train_with_pytorch_runtime.py"


@pytest.mark.parametrize("kind", ["dualpipev", "plan"])
def test_the_example_trains_and_matches_one_process(package, kind):
    out = subprocess.run([sys.executable, str(EXAMPLE), "--kind", kind, "--ranks", "2", "--microbatches", "4",
                          "--steps", "3", "--context", "16", "--width", "32"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "matches one process" in out.stdout, out.stdout
    losses = [float(v) for v in re.findall(r"step +\d+ +loss ([0-9.]+)", out.stdout)]
    assert len(losses) == 3 and losses[-1] < losses[0], out.stdout


def test_a_schedule_pytorch_cannot_run_is_refused_before_any_process(package):
    out = subprocess.run([sys.executable, str(EXAMPLE), "--kind", "dualpipe"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2 and "two-direction placement" in out.stderr, out.stderr
