"""dualpipe.DualPipe and dualpipe.DualPipeV against deepseek-ai/DualPipe's own example checks (rewritten in
deepseek_examples.py): losses and inference outputs equal to one process running the whole model, gradients within
cosine distance 1e-13, the module's overlapped_forward_backward used (with criterion0 where the reference gives it),
every weight gradient that the reference's LinearFunc put aside in WeightGradStore run once at its W action; over
Gloo (over the direct links, and through the group's own messages) and under NCCL's rules on Gloo
(DUALPIPE_NCCL_RULES=1: directional channels, messages matched by order alone),
at 2, 4 and 8 processes; and the errors of bad input (issue 52's among them: losses outside the autograd graph,
concurrent steps, num_chunks differing between ranks, timeouts and memory sizes that are not numbers); and a failure
or Ctrl-C on one of two ranks as the other sees it (deepseek_failures.py); and a program's end with its pipeline
alive (exit_checks.py)."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")
EXAMPLES = os.path.join(os.path.dirname(__file__), "deepseek_examples.py")
FAILURES = os.path.join(os.path.dirname(__file__), "deepseek_failures.py")
EXIT_CHECKS = os.path.join(os.path.dirname(__file__), "exit_checks.py")
# The reference's sizes at 4 ranks; 2 and 8 ranks narrower, so that 8 processes fit 2 cores.
SMALL = ("--hidden", "64", "--seq-len", "16")


def run(*args, env=None):
    done = subprocess.run([sys.executable, EXAMPLES, *args], capture_output=True, text=True, timeout=400,
                          env=None if env is None else {**os.environ, **env})
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def expect_every_rank_passed(out, kind, ranks, transport="direct links"):
    assert f"{kind}: every check passed" in out
    for rank in range(ranks):
        assert f"rank {rank}: {kind} losses equal" in out, out
        assert f"rank {rank}: messages over {transport}" in out, out
        assert "none at an I" in out


@pytest.mark.parametrize("kind", ["dualpipe", "dualpipev"])
def test_reference_example_checks_pass_on_four_processes(kind):
    expect_every_rank_passed(run(kind, "--ranks", "4"), kind, 4)


@pytest.mark.parametrize("ranks", [2, 8])
@pytest.mark.parametrize("kind", ["dualpipe", "dualpipev"])
def test_reference_example_checks_pass_on_two_and_eight_processes(kind, ranks):
    expect_every_rank_passed(run(kind, "--ranks", str(ranks), *SMALL), kind, ranks)


# Issue 75: a program that kept the reference's own WeightGradStore class and put it in dualpipe.utils got
# "AttributeError: type object 'WeightGradStore' has no attribute '_begin'" from inside the step.
@pytest.mark.parametrize("kind", ["dualpipe", "dualpipev"])
def test_a_programs_copy_of_the_reference_weight_grad_store_defers_at_w(kind):
    expect_every_rank_passed(run(kind, "--ranks", "2", "--reference-store", *SMALL), kind, 2)


@pytest.mark.parametrize("ranks", [2, 4, 8])
@pytest.mark.parametrize("kind", ["dualpipe", "dualpipev"])
def test_reference_example_checks_pass_under_nccl_rules(kind, ranks):
    expect_every_rank_passed(run(kind, "--ranks", str(ranks), "--nccl-rules", *SMALL), kind, ranks,
                             "directional channels")


# The messages through the Gloo group's own send and recv, as before the direct links (DUALPIPE_DIRECT_LINKS=0).
@pytest.mark.parametrize("kind", ["dualpipe", "dualpipev"])
def test_reference_example_checks_pass_through_the_groups_own_messages(kind):
    expect_every_rank_passed(run(kind, "--ranks", "4", *SMALL, env={"DUALPIPE_DIRECT_LINKS": "0"}), kind, 4,
                             "process group")


def test_bad_input_raises_naming_the_rule():
    out = run("errors")
    for what in ("three modules", "one module", "num_chunks=1", "num_chunks=0", "DualPipe with one rank",
                 "non-scalar criterion", "no criterion", "NCCL group, modules on the CPU", "pop without a flush",
                 "constant loss", "detached loss", "integer loss", "identity modules", "labels=None", "batch_dim=5",
                 "timeout=nan", "timeout=inf", "timeout=1e+16", "max_memory=1.5", "max_memory=0", "max_memory=True",
                 "a limit named as Python names it", "modules=3", "rank_mapping=['0']", "batch_dim='0'", "dp_group=1",
                 "stall_report_dir=1", "set_p2p_tensor_shapes([(2, '8')])", "stall_report_after=0.5", "stall_report_after above half the timeout", "step() from a second thread", "a step after the errors"):
        assert what in out, out


def test_failures_on_one_rank_are_named_on_the_other():
    done = subprocess.run([sys.executable, FAILURES], capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "failure: every check passed" in done.stdout, done.stdout


def test_a_program_ends_with_its_pipeline_closed_and_status_0():
    done = subprocess.run([sys.executable, EXIT_CHECKS, "--runs", "3"], capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "exit checks: 3 of 3 runs ended well" in done.stdout, done.stdout
    for rank in (0, 1):
        assert f"rank {rank}: at exit the pipeline let go of its group and refused to run: this pipeline was closed" \
            in done.stdout, done.stdout


def test_the_runtime_places_the_stages_as_the_reference_documents():
    """dualpipe.DualPipe takes its stages and their copies from the runtime's placement; the reference's README
    states them: DualPipe's rank r holds stages r and R-1-r, each with its second copy on rank R-1-r; DualPipeV's
    holds stages r and 2R-1-r, one copy of each."""
    from dualpipe import _runtime
    for ranks in (2, 4, 8):
        for r in range(ranks):
            assert _runtime.stages_of_rank("dualpipe", ranks, r) == ([r, ranks - 1 - r], [[ranks - 1 - r]] * 2)
            assert _runtime.stages_of_rank("dualpipev", ranks, r) == ([r, 2 * ranks - 1 - r], [[], []])
