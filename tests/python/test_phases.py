"""dualpipe.phases: a Python MoE block's overlapped_forward_backward built from its phase list, trained by
dualpipe.DualPipe over two replicas whose stages exchange tokens (phased_moe.py), against one process; the order in
which a pair runs its halves' phases; and the errors of a bad phase list."""
import os
import re
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
from dualpipe.phases import (AllToAll, Compute, Phases, _backward_steps, _forward_steps, _interleave,  # noqa: E402
                             _Record, _run)

PROGRAM = os.path.join(os.path.dirname(__file__), "phased_moe.py")


def test_a_phased_moe_block_under_dualpipe_trains_as_one_process():
    done = subprocess.run([sys.executable, PROGRAM], capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr
    for rank in range(4):
        assert f"rank {rank}: phased MoE block under DualPipe: losses and outputs equal to one process" in done.stdout


class FakeExchange(AllToAll):
    """An exchange of one rank with itself that logs when it starts and when it is waited for."""

    def __init__(self, name, log):
        super().__init__(name)
        self.log = log

    def start(self, module, tensor):
        log, name = self.log, self.name

        class Work:
            def wait(self):
                log.append(f"wait {name}")

        log.append(f"start {name}")
        return tensor.detach().clone(), Work()


def test_a_pair_interleaves_its_halves_and_waits_for_each_exchange_at_first_use():
    log = []
    layer = torch.nn.Linear(4, 4)

    def compute(name):
        def run(module, *x):
            log.append(name)
            return module(x[-1]) if len(x) == 1 else (x[0], module(x[-1]))
        return run

    phases = (Compute("attn", compute("attn")), FakeExchange("dispatch", log), Compute("experts", compute("experts")),
              FakeExchange("combine", log), Compute("combine", compute("combine")))
    earlier = _Record(phases, layer, (torch.randn(2, 4, requires_grad=True),))
    _run(_forward_steps(earlier))
    log.clear()
    later, grads = _Record(phases, layer, (torch.randn(2, 4),)), []
    _interleave(_backward_steps(earlier, [torch.ones(2, 4)], grads), [p for p, _, _ in reversed(earlier.steps)],
                _forward_steps(later), phases)
    # The backward's first: its combine's gradient goes out, the forward's attention runs while it is under way,
    # and so on; each exchange is waited for by the phase that uses it (DeepSeek's order, as the C++ rule gives it:
    # schedule/phase_order.h, worked by hand here).
    assert log == ["start combine", "attn", "start dispatch", "wait combine", "start dispatch", "wait dispatch",
                   "experts", "start combine", "wait dispatch", "wait combine", "combine"]
    assert grads[0] is not None and grads[0].shape == (2, 4)


def test_the_order_is_the_runtimes_and_the_simulators_rule():
    """dualpipe._core.interleaved_phase_order is the rule the C++ runtime runs and the simulator times; its header's
    example, worked by hand: combine(B) attn(F) mlp(B) mlp(W) mlp(F) attn(B) attn(W) combine(F)."""
    from dualpipe import _core
    backward = [(True, False), (True, False), (False, True), (False, False), (False, True)]  # combine mlp mlpW attn attnW
    forward = [(True, False), (True, False), (False, False)]  # attn mlp combine
    order = [f"{chain}{index}" for chain, index in _core.interleaved_phase_order(backward, forward)]
    assert order == ["B0", "F0", "B1", "B2", "F1", "B3", "B4", "F2"]


def test_bad_phase_lists_are_named():
    with pytest.raises(ValueError, match="first phase must be a Compute"):
        Phases(AllToAll("dispatch"))
    with pytest.raises(ValueError, match="each phase is a Compute or an AllToAll"):
        Phases(Compute("attn", lambda m, x: x), "experts")
    with pytest.raises(ValueError, match="must be callable"):
        Compute("attn", 3)


@pytest.mark.parametrize("result, got", [(None, "NoneType"), ({"h": 1}, "dict"), ((), "()"),
                                         (lambda x: (x, 3), "(Tensor, int)")])
def test_a_compute_phase_that_returns_no_tensors_is_named(result, got):
    """Its result went on to the exchange or the autograd join, which failed with AttributeError naming neither."""
    layer = torch.nn.Linear(4, 4)
    returns = result if callable(result) else (lambda x: result)
    phases = (Compute("attn", lambda module, x: returns(x)), FakeExchange("dispatch", []),
              Compute("experts", lambda module, x: module(x)))
    with pytest.raises(ValueError, match=r"Compute 'attn' must return a tensor or a tuple of tensors \(the next "
                                         r"phase's inputs\), got " + re.escape(got)):
        _run(_forward_steps(_Record(phases, layer, (torch.randn(2, 4, requires_grad=True),))))


def test_an_exchange_is_waited_for_within_the_steps_timeout_and_named_past_it():
    """Outside a step an exchange waits as long as its group does; inside one (dualpipe.DualPipe.step sets
    phases.step_timeout) it waited forever for a peer that never joined, past the pipeline's timeout."""
    import datetime
    import dualpipe.phases as phases

    class Work:
        def __init__(self, fails):
            self.fails, self.timeouts = fails, []

        def wait(self, timeout=None):
            self.timeouts.append(timeout)
            if self.fails:
                raise RuntimeError("Operation timed out!")  # as gloo's wait(timeout) says it

    dispatch = AllToAll("dispatch")
    outside = Work(fails=False)
    phases.wait_within_step(outside, "AllToAll 'dispatch'")
    assert outside.timeouts == [None]
    phases.step_timeout = 7.5
    try:
        inside = Work(fails=False)
        phases._wait(inside, dispatch)
        assert inside.timeouts == [datetime.timedelta(seconds=7.5)]
        with pytest.raises(RuntimeError, match=r"AllToAll 'dispatch': the exchange did not complete within "
                                               r"timeout=7.5 s .*Operation timed out!"):
            phases._wait(Work(fails=True), dispatch)

        class OwnWork:  # a program's own wrapper whose wait() takes no timeout: waited for without one
            waited = False

            def wait(self):
                OwnWork.waited = True

        phases._wait(OwnWork(), dispatch)
        assert OwnWork.waited
    finally:
        phases.step_timeout = None
