"""dualpipe.DualPipe and dualpipe.DualPipeV against deepseek-ai/DualPipe's own example checks (rewritten in
deepseek_examples.py): 4 Gloo processes, the reference's model and sizes, losses and inference outputs equal to one
process running the whole model, gradients within cosine distance 1e-13, the module's overlapped_forward_backward
used; and the errors of bad input."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")
EXAMPLES = os.path.join(os.path.dirname(__file__), "deepseek_examples.py")


def run(*args):
    done = subprocess.run([sys.executable, EXAMPLES, *args], capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.parametrize("kind", ["dualpipe", "dualpipev"])
def test_reference_example_checks_pass_on_four_processes(kind):
    out = run(kind, "--ranks", "4")
    assert f"{kind}: every check passed" in out
    for rank in range(4):
        assert f"rank {rank}: {kind} losses equal" in out


def test_bad_input_raises_naming_the_rule():
    out = run("errors")
    for what in ("three modules", "one module", "num_chunks=1", "num_chunks=0", "DualPipe with one rank",
                 "non-scalar criterion", "no criterion", "a step after the errors"):
        assert what in out, out


def test_a_failing_module_on_one_rank_is_named_on_the_other():
    out = run("failure")
    assert "failure: every check passed" in out, out
