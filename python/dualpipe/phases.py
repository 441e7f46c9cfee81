"""A ready-made `overlapped_forward_backward` for DualPipe (docs/python.md, "Phases"): a module's forward written as
a list of phases, compute and all-to-alls, and the overlapped pair built from it as DeepSeek overlaps one chunk's
forward with another's backward (DeepSeek-V3, section 3.2.1).

    from dualpipe.phases import AllToAll, Compute, Phases

    class MoEBlock(nn.Module):
        phases = Phases(
            Compute("attn", lambda self, x: self.attention(x)),          # -> (residual, tokens to send)
            AllToAll("dispatch", group=lambda self: self.ep_group),      # exchanges the last tensor
            Compute("experts", lambda self, h, t: (h, self.experts(t))),
            AllToAll("combine", group=lambda self: self.ep_group),
            Compute("combine", lambda self, h, r: h + r),
        )
        forward = phases.forward
        overlapped_forward_backward = phases.overlapped_forward_backward

Each compute phase runs on its own piece of the autograd graph, so its backward can run on its own; each all-to-all
is started asynchronously (equal chunks of the first dimension over its group) and waited for where its result is
first used, in the forward and in the backward (the gradient goes back by the same exchange). In an overlapped pair
the backward's phases and the forward's interleave on the calling thread in DeepSeek's order: the backward first,
each half computing until it has started an exchange, then the other half computes while that exchange is under
way; the order is the C++ runtime's and the simulator's own rule (`dualpipe._core.interleaved_phase_order`). Outside
a pair (a lone forward or backward) the phases run one after the other, the same maths in the same order, so a pair
leaves what the forward followed by the backward leaves.

A compute phase takes the tensors the previous phase left (the module's inputs for the first) and returns a tensor
or a tuple of them; an all-to-all exchanges the last one and passes the others on. Parameter gradients are computed
with each compute phase's input gradients (not deferred to a W action).
"""
import datetime
import functools
import inspect
import weakref
from typing import Callable, List, Optional, Sequence, Tuple, Union

import torch
import torch.distributed as dist

from . import _core

__all__ = ["AllToAll", "Compute", "Phases"]


class Compute:
    """A phase that computes: fn(module, *tensors) -> tensor or tuple of tensors."""

    def __init__(self, name: str, fn: Callable):
        if not callable(fn):
            raise ValueError(f"Compute {name!r}: fn must be callable (module, *tensors) -> tensors, got {fn!r}")
        self.name, self.fn = name, fn


class AllToAll:
    """A phase that exchanges the last tensor over `group` (a process group, a callable(module) returning one, or
    None for the default group): equal chunks of its first dimension, chunk i to rank i of the group."""

    def __init__(self, name: str, group: Union[None, dist.ProcessGroup, Callable] = None):
        self.name, self.group = name, group

    def group_of(self, module):
        return self.group(module) if callable(self.group) else self.group

    def start(self, module, tensor: torch.Tensor) -> Tuple[torch.Tensor, object]:
        group = self.group_of(module)
        size = dist.get_world_size(group)
        if tensor.dim() == 0 or tensor.shape[0] % size:
            raise ValueError(f"AllToAll {self.name!r}: the exchanged tensor's first dimension "
                             f"{tuple(tensor.shape)[:1]} must split into {size} equal chunks (one per rank of the "
                             f"group)")
        sent = tensor.detach().contiguous()
        received = torch.empty_like(sent)
        return received, dist.all_to_all_single(received, sent, group=group, async_op=True)


Tensors = Tuple[torch.Tensor, ...]

# The running DualPipe step's timeout in seconds, set by it for the step's length (deepseek.py): an exchange a peer
# never joins fails naming the phase within it, as a pipeline message would. None outside a step: the group's own.
step_timeout: Optional[float] = None


@functools.lru_cache(maxsize=None)
def _takes_timeout(work_type: type) -> bool:
    """Whether work_type.wait() takes a timeout: torch's Work does (its pybind11 method has no Python signature); a
    work object of a program's own (a wrapper that delays or counts) may not, and is then waited for without one.
    Asked once per type: every exchange waits."""
    try:
        return "timeout" in inspect.signature(work_type.wait).parameters
    except (TypeError, ValueError):
        return True


def wait_within_step(work, what: str) -> None:
    """Waits for an asynchronous collective (`what` names it in the error) within the running step's timeout."""
    if step_timeout is None or not _takes_timeout(type(work)):
        work.wait()
        return
    try:
        work.wait(timeout=datetime.timedelta(seconds=step_timeout))
    except RuntimeError as error:
        raise RuntimeError(f"{what}: the exchange did not complete within timeout={step_timeout} s (a rank of its "
                           f"group is stuck, gone, or exchanging something else): {error}") from error


def _wait(work, phase: AllToAll) -> None:
    wait_within_step(work, f"AllToAll {phase.name!r}")


def _as_tuple(x) -> Tensors:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


class _Record:
    """One forward's phases, kept for its backward: each compute phase's inputs (fresh leaves) and outputs."""

    def __init__(self, phases, module, inputs):
        self.phases, self.module, self.inputs = phases, module, inputs
        self.steps: List[Tuple[object, Optional[Tensors], Optional[Tensors]]] = []
        self.outputs: Tensors = ()
        self.stage_outputs: List[weakref.ref] = []  # what the module returned (the _Phased node's outputs)


def _compute_outputs(phase: Compute, result) -> Tensors:
    """What a compute phase returned, as a tuple: a tensor or a non-empty tuple or list of tensors. Anything else
    (None, a number, a dict) failed later inside an exchange or the autograd join, naming neither the phase nor the
    rule."""
    outputs = _as_tuple(result)
    if not outputs or not all(isinstance(t, torch.Tensor) for t in outputs):
        got = (type(result).__name__ if not isinstance(result, (tuple, list))
               else "(" + ", ".join(type(t).__name__ for t in result) + ")")
        raise ValueError(f"Compute {phase.name!r} must return a tensor or a tuple of tensors (the next phase's "
                         f"inputs), got {got}")
    return outputs


def _leaf(t, requires_grad):
    return t.detach().requires_grad_(requires_grad) if isinstance(t, torch.Tensor) else t


def _forward_steps(record: _Record):
    """The forward, a generator that yields after each phase (after starting an exchange, for an all-to-all); the
    exchange is waited for at the next phase."""
    x = record.inputs
    needs = [isinstance(t, torch.Tensor) and t.requires_grad for t in x]
    pending = None  # (work, its phase)
    for phase in record.phases:
        if pending is not None:
            _wait(*pending)
            pending = None
        if isinstance(phase, AllToAll):
            received, work = phase.start(record.module, x[-1])
            pending = (work, phase)
            record.steps.append((phase, None, None))
            x = x[:-1] + (received,)
            yield
            continue
        x_in = tuple(_leaf(t, n) for t, n in zip(x, needs))
        with torch.enable_grad():
            y = _compute_outputs(phase, phase.fn(record.module, *x_in))
        record.steps.append((phase, x_in, y))
        x = y
        needs = [isinstance(t, torch.Tensor) and t.requires_grad for t in y]
        yield
    if pending is not None:
        _wait(*pending)
    record.outputs = x


def _backward_steps(record: _Record, output_grads: Sequence[Optional[torch.Tensor]], result: list):
    """The backward, a generator that yields after each phase (after starting an exchange of gradients, for an
    all-to-all); leaves the gradients of the forward's inputs in `result`."""
    grads = list(output_grads)
    pending = None  # (received, work, its phase)
    for phase, x_in, y in reversed(record.steps):
        if isinstance(phase, AllToAll):
            if pending is not None:  # two exchanges in a row
                _wait(*pending[1:])
                grads[-1] = pending[0]
            if grads[-1] is None:
                raise ValueError(f"AllToAll {phase.name!r}: no gradient reached the exchanged tensor; every rank "
                                 f"of the group must exchange it")
            pending = (*phase.start(record.module, grads[-1]), phase)
            yield
            continue
        if pending is not None:
            _wait(*pending[1:])
            grads[-1] = pending[0]
            pending = None
        roots = [(t, g) for t, g in zip(y, grads) if isinstance(t, torch.Tensor) and t.requires_grad and g is not None]
        if roots:
            torch.autograd.backward([t for t, _ in roots], [g for _, g in roots])
        grads = [t.grad if isinstance(t, torch.Tensor) and t.requires_grad else None for t in x_in]
        yield
    if pending is not None:
        _wait(*pending[1:])
        grads[-1] = pending[0]
    result[:] = grads


def _run(chain):
    """Runs a lone forward's or backward's phases one after the other."""
    for _ in chain:
        pass


def _exchanges(phases) -> List[Tuple[bool, bool]]:
    """Each phase as the C++ order rule describes it: (starts an exchange, weight gradients only). Compute phases
    compute their parameter gradients with their input gradients, so none is a weight phase."""
    return [(isinstance(phase, AllToAll), False) for phase in phases]


def _interleave(backward, backward_phases, forward, forward_phases):
    """Runs an overlapped pair's two chains (generators yielding after each phase) in the order the runtime and the
    simulator use, taken from the C++ rule (schedule/phase_order.h): the backward's first, a chain keeping the turn
    until it has started an exchange."""
    chains = {"B": backward, "F": forward}
    for chain, _ in _core.interleaved_phase_order(_exchanges(backward_phases), _exchanges(forward_phases)):
        next(chains[chain])
    for chain in (backward, forward):  # what follows each chain's last phase: its last exchange's wait
        _run(chain)


class _Phased(torch.autograd.Function):
    """Joins a phased forward to the caller's graph: its outputs are the last phase's, its backward runs the phases'
    backwards one after the other (a lone backward). Takes the module's parameters too, so that its outputs need a
    gradient whenever a parameter does."""

    @staticmethod
    def forward(ctx, record, num_inputs, *inputs_and_parameters):
        ctx.record, ctx.num_inputs = record, num_inputs
        ctx.num_parameters = len(inputs_and_parameters) - num_inputs
        return tuple(t.detach() for t in record.outputs)

    @staticmethod
    def backward(ctx, *grads):
        result = []
        _run(_backward_steps(ctx.record, grads, result))
        ctx.record = None
        return (None, None, *result, *([None] * ctx.num_parameters))


def _find_record(loss: torch.Tensor) -> _Record:
    """The record of the phased forward below `loss` (the last stage's criterion)."""
    seen, queue = set(), [loss.grad_fn]
    while queue:
        node = queue.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        record = getattr(node, "record", None)
        if isinstance(record, _Record):
            return record
        queue.extend(n for n, _ in node.next_functions)
    raise ValueError("overlapped_forward_backward: loss1 was not computed from a module whose forward is "
                     "Phases.forward")


class Phases:
    """A module's forward as phases, and the overlapped forward-backward built from them (see the module's doc)."""

    def __init__(self, *phases: Union[Compute, AllToAll]):
        if not phases or not isinstance(phases[0], Compute):
            raise ValueError("Phases: the first phase must be a Compute (it takes the module's inputs)")
        for p in phases:
            if not isinstance(p, (Compute, AllToAll)):
                raise ValueError(f"Phases: each phase is a Compute or an AllToAll, got {p!r}")
        self.phases = phases

    @property
    def forward(self):
        phases = self

        def forward(module, *inputs):
            record = _Record(phases.phases, module, tuple(inputs))
            _run(_forward_steps(record))
            return phases._join(module, record)

        return forward

    @staticmethod
    def _join(module, record):
        if not torch.is_grad_enabled():
            outputs = record.outputs
        else:
            outputs = _Phased.apply(record, len(record.inputs), *record.inputs, *module.parameters())
            record.stage_outputs = [weakref.ref(t) for t in outputs]
        return outputs[0] if len(outputs) == 1 else outputs

    @property
    def overlapped_forward_backward(self):
        phases = self

        def overlapped_forward_backward(cls, module0, inputs0, criterion0, labels0, module1, loss1, outputs1,
                                        output_grads1):
            if loss1 is not None:
                record1 = _find_record(loss1)
                stage_outputs = [ref() for ref in record1.stage_outputs]
                grads1 = torch.autograd.grad(loss1, stage_outputs)
            else:
                outputs1 = _as_tuple(outputs1)
                record1 = getattr(outputs1[0].grad_fn, "record", None)
                if not isinstance(record1, _Record):
                    raise ValueError("overlapped_forward_backward: outputs1 do not come from Phases.forward")
                grads1 = _as_tuple(output_grads1)
            record0 = _Record(phases.phases, module0, tuple(inputs0))
            input_grads1: list = []
            _interleave(_backward_steps(record1, grads1, input_grads1), [p for p, _, _ in reversed(record1.steps)],
                        _forward_steps(record0), phases.phases)
            for t, g in zip(record1.inputs, input_grads1):  # where the caller reads them, as after loss.backward()
                if isinstance(t, torch.Tensor) and t.requires_grad and g is not None:
                    t.grad = g if t.grad is None else t.grad + g
            outputs0 = _as_tuple(Phases._join(module0, record0))
            loss0 = criterion0(*outputs0, *labels0) if criterion0 is not None else None
            return outputs0, loss0

        return classmethod(overlapped_forward_backward)
