"""`dualpipe.overlap_moe(stage)`: DeepSeek's forward-backward overlap for a stage with MoE layers as people write
them, with no phase list (docs/python.md, "MoE overlap without phases").

    dualpipe.overlap_moe(stage, other_stage)         # their MoE layers' `dispatch` and `combine` are found
    dualpipe.overlap_moe(stage, other_stage, dispatch="permute", combine="unpermute")   # or named
    pipe = dualpipe.DualPipeV((stage, other_stage))

In an overlapped pair the forward of one micro-batch and the backward of another run as two chains, each on a thread
of its own but one at a time, in DeepSeek's order (DeepSeek-V3, section 3.2.1): the backward first; each chain runs
until it issues an all-to-all, which then travels while the other chain computes, and waits for it only when its turn
comes back. The all-to-alls are the `torch.distributed.all_to_all_single` calls of floating-point tensors that the MoE
layers' dispatch and combine make, and, in the backward, those that their autograd Functions make to send the
gradients back (exchanges of integers, such as the tokens' counts per expert, run at once). The maths and
its order within each chain are the module's own, so the results equal a forward followed by a backward, to the bit.

Parameter gradients of an overlapped pair are computed with its backward (not deferred to a W action), as with
`dualpipe.phases`. Outside a pair (a lone forward or backward) the module runs as written. To see the exchanges,
`torch.distributed.all_to_all_single` is wrapped for the process, once; outside a pair's chains the wrapper calls the
original at once. Code that imported the function by name, or uses functional collectives, is not seen: its
exchanges run where they stand, correct but not overlapped.
"""
import threading
from typing import Callable, List, Optional

import torch
import torch.distributed as dist
import torch.nn as nn

from . import phases

__all__ = ["overlap_moe"]

_local = threading.local()  # .chain: the chain this thread runs, if any
_issue_all_to_all: Optional[Callable] = None  # torch.distributed.all_to_all_single as it was before we wrapped it


class _Chain:
    """Runs `fn` on a thread of its own, a turn at a time: a turn ends where `fn` issues an exchange, or returns."""

    def __init__(self, fn: Callable, every_exchange: bool):
        self.fn, self.every_exchange = fn, every_exchange
        self.inside_exchange_part = 0  # > 0 while a forward runs a MoE layer's dispatch or combine
        self.result = self.error = None
        self.done = False
        self._go, self._back = threading.Semaphore(0), threading.Semaphore(0)
        self._thread = threading.Thread(target=self._main, daemon=True, name="dualpipe-overlap")
        self._thread.start()

    def _main(self):
        _local.chain = self
        self._go.acquire()
        try:
            self.result = self.fn()
        except BaseException as error:  # noqa: BLE001 - raised again on the calling thread
            self.error = error
        finally:
            self.done = True
            self._back.release()

    def turn(self):
        """From the driving thread: runs the chain until its next exchange is under way, or its end."""
        self._go.release()
        self._back.acquire()

    def pause(self):
        """From the chain's thread: gives the turn back."""
        self._back.release()
        self._go.acquire()

    def yields_at_exchanges(self) -> bool:
        return self.every_exchange or self.inside_exchange_part > 0


def _all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None, async_op=False):
    chain = getattr(_local, "chain", None)
    # Integer exchanges (a dispatch's counts per expert) are metadata the next exchange's sizes wait for: they run
    # at once, so that the turn is given where tokens or their gradients travel.
    if chain is None or async_op or not chain.yields_at_exchanges() or not input.is_floating_point():
        return _issue_all_to_all(output, input, output_split_sizes, input_split_sizes, group=group, async_op=async_op)
    work = _issue_all_to_all(output, input, output_split_sizes, input_split_sizes, group=group, async_op=True)
    chain.pause()  # the other chain computes while the exchange travels
    phases.wait_within_step(work, "an all-to-all of the overlapped MoE block")
    return None


def _in_threads_state(fn: Callable) -> Callable:
    """fn, run with the calling thread's autocast and CUDA stream (thread-local in PyTorch)."""
    autocast = [(d, torch.get_autocast_dtype(d)) for d in ("cpu", "cuda") if torch.is_autocast_enabled(d)]
    stream = torch.cuda.current_stream() if torch.cuda.is_available() and torch.cuda.is_initialized() else None

    def run():
        contexts = [torch.autocast(d, dtype=t) for d, t in autocast]
        if stream is not None:
            contexts.append(torch.cuda.stream(stream))
        for c in contexts:
            c.__enter__()
        try:
            return fn()
        finally:
            for c in reversed(contexts):
                c.__exit__(None, None, None)
    return run


def _run(chains: List[_Chain]) -> None:
    live = list(chains)
    while live:
        for chain in list(live):
            chain.turn()
            if chain.done:
                live.remove(chain)
    for chain in chains:
        if chain.error is not None:
            raise chain.error


def _overlapped_forward_backward(cls, module0, inputs0, criterion0, labels0, module1, loss1, outputs1,
                                 output_grads1):
    def backward():
        if loss1 is not None:
            torch.autograd.backward(loss1)
        else:
            outs = outputs1 if isinstance(outputs1, (tuple, list)) else (outputs1,)
            grads = output_grads1 if isinstance(output_grads1, (tuple, list)) else (output_grads1,)
            roots = [(t, g) for t, g in zip(outs, grads) if t.requires_grad and g is not None]
            torch.autograd.backward([t for t, _ in roots], [g for _, g in roots])

    def forward():
        with torch.enable_grad():
            outputs = module0(*inputs0)
            outs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
            loss = criterion0(*outs, *labels0) if criterion0 is not None else None
        return outputs, loss

    b = _Chain(_in_threads_state(backward), every_exchange=True)
    f = _Chain(_in_threads_state(forward), every_exchange=False)
    _run([b, f])  # DeepSeek's order: the backward's turn first
    return f.result


def _exchange_part(method: Callable) -> Callable:
    """A MoE layer's dispatch or combine: the all-to-alls it issues in a forward chain end the chain's turn."""
    def part(*args, **kwargs):
        chain = getattr(_local, "chain", None)
        if chain is None:
            return method(*args, **kwargs)
        chain.inside_exchange_part += 1
        try:
            return method(*args, **kwargs)
        finally:
            chain.inside_exchange_part -= 1
    part.__wrapped__ = method
    return part


def overlap_moe(*stages: nn.Module, dispatch: str = "dispatch", combine: str = "combine") -> List[nn.Module]:
    """Gives the stages' classes the overlapped forward-backward of DualPipe (`overlapped_forward_backward`) built
    from the stages as written; call it on a rank's stages before building its DualPipe. The MoE layers are their
    submodules with methods named `dispatch` and `combine`, whose all-to-alls travel while the other half of the
    pair computes (a stage without one, such as a first stage of dense layers, runs its pairs as written). Returns
    the MoE layers. Raises ValueError when none of the stages has one, naming what it looked for."""
    global _issue_all_to_all
    if not stages:
        raise ValueError("overlap_moe takes the stage modules of this rank, got none")
    for stage in stages:
        if not isinstance(stage, nn.Module):
            raise ValueError(f"overlap_moe takes stage modules (nn.Module), got {type(stage).__name__}")
    for name, value in (("dispatch", dispatch), ("combine", combine)):
        if not isinstance(value, str) or not value.isidentifier():
            raise ValueError(f"overlap_moe: {name}={value!r} must be the name of a method of the MoE layer")
    layers = [m for stage in stages for m in stage.modules()
              if callable(getattr(m, dispatch, None)) and callable(getattr(m, combine, None))]
    if not layers:
        names = ", ".join(sorted({type(s).__name__ for s in stages}))
        raise ValueError(f"overlap_moe: no submodule of {names} has both a {dispatch!r} and a {combine!r} method "
                         "(a MoE layer's token dispatch and combine, whose all-to-alls the overlap hides); name them "
                         "with dispatch=... and combine=...")
    for kind in {type(s) for s in stages}:
        existing = getattr(kind, "overlapped_forward_backward", None)
        if existing is not None and getattr(existing, "__func__", None) is not _overlapped_forward_backward:
            raise ValueError(f"overlap_moe: {kind.__name__} already defines overlapped_forward_backward; one of the "
                             "two would be ignored")
    for layer in layers:
        for part in (dispatch, combine):
            method = getattr(layer, part)
            if not hasattr(method, "__wrapped__"):
                setattr(layer, part, _exchange_part(method))
    if _issue_all_to_all is None:
        _issue_all_to_all = dist.all_to_all_single
        dist.all_to_all_single = _all_to_all_single
    for kind in {type(s) for s in stages}:
        kind.overlapped_forward_backward = classmethod(_overlapped_forward_backward)
    return layers
