"""DeepSeek's DualPipe and DualPipeV API (deepseek-ai/DualPipe) on dualpipe's C++ executor.

    pipe = dualpipe.DualPipe((stage_r, stage_mirror))          # as the reference: two modules per rank
    loss, outputs = pipe.step(x, num_chunks=20, criterion=criterion, labels=(l,))

The constructor and step() keep the reference's semantics: which ranks take inputs and labels, which get the
loss (one per micro-batch, stacked) and the outputs, what the criterion receives (criterion(*outputs, *labels)),
forward only under torch.no_grad(), and DualPipe's two parameter copies (module 0 is stage r, module 1 stage
R-1-r; summing their gradients is left to you, as there). The schedule is ours (`dualpipe schedule dualpipe`),
executed by the C++ runtime with the GIL released while it communicates or waits; the modules, the criterion and
an `overlapped_forward_backward` classmethod of the module class are called back under the GIL.

Weight gradients are deferred to the schedule's W actions (defer_weight_grads, on by default): through the
autograd graph for ordinary modules, and through the reference's `dualpipe.utils.WeightGradStore` for autograd
Functions that use it. An NCCL group works: the pipeline's messages then travel over two directional channels that
the group's ranks make from it. Differences from the reference, all documented in docs/python.md:
set_p2p_tensor_shapes is optional (without it shapes travel with the messages; with it, they are checked at every
boundary between stages).
"""
from __future__ import annotations

import atexit
import math
import operator
import os
import signal
import threading
import weakref
from collections.abc import Sequence as _Sequence
from typing import Callable, List, Optional, Sequence, Tuple, Union

import torch
import torch.distributed as dist
import torch.nn as nn

from . import _rendezvous
from . import fsdp
from . import phases
from . import utils

try:
    from . import _runtime
except ImportError as error:
    raise ImportError("dualpipe.DualPipe needs the extension dualpipe._runtime, which the package builds only where "
                      "the installing Python has PyTorch and Gloo's headers are found (libgloo-dev): reinstall with "
                      f"them (docs/python.md, Install). {error}") from error

__all__ = ["DualPipe", "DualPipeV", "set_p2p_tensor_dtype", "set_p2p_tensor_shapes"]

# What crosses every stage boundary, per micro-batch, as the reference's set_p2p_tensor_shapes/_dtype declare it.
_p2p = {"shapes": [], "dtype": torch.float32}


def _is_int(value) -> bool:
    """An integer (anything with __index__: int, numpy's), and not a bool (True is an int to Python, and a number
    of nothing here)."""
    if isinstance(value, bool):
        return False
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def _check_flag(name: str, flag) -> None:
    if not isinstance(flag, bool):  # 'false' is a true string: taken by truthiness it recorded every action
        raise ValueError(f"{name}={flag!r} must be True or False")


def set_p2p_tensor_shapes(shapes: Sequence[Sequence[int]]) -> None:
    """Optional here (shapes otherwise travel with every message): the shapes of the tensors that pass between
    stages for one micro-batch, as the reference declares them (not the first stage's inputs nor the last stage's
    outputs: token ids and logits may differ); -1 matches any size. Declared, receives are posted ahead, headers do
    not travel, and each stage but the first is checked once on zeros of these shapes when a DualPipe first runs a
    given num_chunks (the first stage's outputs on its first micro-batch). Applies to pipelines built after the
    call."""
    if isinstance(shapes, (str, bytes)) or not isinstance(shapes, _Sequence):
        raise ValueError(f"set_p2p_tensor_shapes: {shapes!r} must be a list of shapes (lists or tuples of sizes)")
    for shape in shapes:
        if (isinstance(shape, (str, bytes)) or not isinstance(shape, _Sequence) or not shape
                or not all(_is_int(d) and (d >= 1 or d == -1) for d in shape)):
            raise ValueError(f"set_p2p_tensor_shapes: {shape!r} is not a shape (sizes >= 1, or -1 for any size)")
    shapes = [tuple(operator.index(d) for d in shape) for shape in shapes]
    _p2p["shapes"] = shapes


def set_p2p_tensor_dtype(dtype: torch.dtype) -> None:
    """The dtype of the tensors of set_p2p_tensor_shapes (default float32)."""
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"set_p2p_tensor_dtype: {dtype!r} is not a torch.dtype")
    _p2p["dtype"] = dtype

Outputs = Optional[Union[torch.Tensor, Tuple[torch.Tensor, ...]]]


# The longest wait a timeout may set (a day), as the trainer's --timeout.
_MAX_TIMEOUT = 86400

# Held by the step running in this process.
_stepping = threading.Lock()

# Every DualPipe and DualPipeV alive, closed at the program's end before the interpreter begins to end: a process
# group's backend thread that still holds the program's last collective needs the interpreter's lock to drop it, and
# once the interpreter is ending it exits instead, ending the process with std::terminate (1 run in 4 of
# bench_real_models did). Closing, without the lock, ends the pipelines' threads, lets go of their groups and gives
# those threads the lock to finish (runtime_module.cpp, Pipeline::close).
_alive: "weakref.WeakSet" = weakref.WeakSet()


@atexit.register
def _close_pipelines() -> None:
    for pipe in list(_alive):
        pipe._let_go()


# Pipelines built on each group so far in this process (every rank builds them in the same order).
_pipelines_built = {}

# Directional channels made on each group so far in this process (every rank of a group makes them in the same
# order, so the count names the same channels on all of them).
_channels_made = {}


def _channels(group: dist.ProcessGroup, backend: str) -> "_runtime.ChannelSpec":
    """Where the pipeline's messages go. NCCL matches a pair's messages by issue order on one stream, so over NCCL
    (and under its rules on Gloo, DUALPIPE_NCCL_RULES=1) they take two directional channels, groups that the
    ranks make through the default store; otherwise the user's group carries them, and on a Gloo group the tensors
    travel on sockets of their own between the ranks (the direct links, docs/runtime.md "Transport": one thread
    woken a message instead of Gloo's three or four; DUALPIPE_DIRECT_LINKS=0 keeps them on the group)."""
    nccl = "nccl" in backend
    if not nccl and os.environ.get("DUALPIPE_NCCL_RULES") != "1":
        return _runtime.ChannelSpec(direct_links=backend == "gloo")
    if nccl and not _runtime.nccl_compiled_in():
        raise ValueError(f"a process group with backend '{backend}' needs dualpipe._runtime built against a "
                         "LibTorch with NCCL; this one has none")
    name = group.group_name
    _channels_made[name] = _channels_made.get(name, 0) + 1
    return _runtime.ChannelSpec(store=dist.distributed_c10d._get_default_store(),
                                prefix=f"dualpipe/channels/{name}/{_channels_made[name]}", nccl=nccl)


def _split_pairs(hook) -> bool:
    """Whether each overlapped pair runs as two actions, its forward and then its backward (split_pairs.h): a module
    without the overlapped_forward_backward hook runs the halves one after the other anyway, and apart the forward
    need not wait for the backward's gradient, nor the next rank for the backward to get the forward's output.
    DUALPIPE_SPLIT_PAIRS=0 keeps the pairs whole, as the reference runs them."""
    return hook is None and os.environ.get("DUALPIPE_SPLIT_PAIRS") != "0"


def _monitor(group: dist.ProcessGroup, pipelines_built: int) -> "_runtime.MonitorSpec":
    """Where the ranks' peer monitors meet: the default store, at the address of its TCPStore's host. They name a
    rank that died, stopped, failed or was interrupted on every other rank at once (docs/python.md, "Failures").
    Another kind of store (file://) leaves each rank to find failures by its own waits."""
    store = dist.distributed_c10d._get_default_store()
    tcp = store
    while isinstance(tcp, dist.PrefixStore):
        tcp = tcp.underlying_store
    if not isinstance(tcp, dist.TCPStore):
        return _runtime.MonitorSpec()
    return _runtime.MonitorSpec(store=store, prefix=f"dualpipe/monitor/{group.group_name}/{pipelines_built}",
                                master_addr=tcp.host)


def _scatter(tensors, chunks: int, dim: int) -> List[Tuple[torch.Tensor, ...]]:
    """The reference's scatter: every tensor cut into `chunks` along `dim` (tensor_split), grouped per chunk."""
    if isinstance(tensors, torch.Tensor):
        tensors = (tensors,)
    tensors = [t for t in tensors if t is not None]
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"inputs and labels are tensors, got {type(t).__name__}")
        if not -t.dim() <= dim < t.dim():
            raise ValueError(f"batch_dim={dim} is not a dimension of a tensor of shape {tuple(t.shape)} "
                             f"({t.dim()} dimensions): give the dimension that holds the batch's rows")
        if t.shape[dim] < chunks:
            raise ValueError(f"a tensor of shape {tuple(t.shape)} cannot be cut into {chunks} micro-batches along "
                             f"batch_dim={dim}: it needs at least {chunks} rows there")
    return [tuple(parts) for parts in zip(*(t.tensor_split(chunks, dim=dim) for t in tensors))]


def _gather(outputs: List[List[torch.Tensor]], dim: int) -> Outputs:
    joined = tuple(torch.cat(parts, dim=dim) for parts in zip(*outputs))
    return joined[0] if len(joined) == 1 else joined


def _stall_report_after(after: Optional[float], timeout: float) -> float:
    """The stall report's wait: a report must come before the ranks give up (half the timeout), and a wait under a
    second is a healthy step's slowest message, not a stall. The default, 10 s, is cut to half a shorter timeout."""
    if after is None:
        after = min(10.0, timeout / 2)
        return after if after >= 1 else 0.0
    if (not isinstance(after, (int, float)) or isinstance(after, bool) or not math.isfinite(after)
            or not (after == 0 or 1 <= after <= _MAX_TIMEOUT)):
        raise ValueError(f"stall_report_after={after!r} must be 0 (only on SIGUSR1) or a number of seconds from 1 "
                         f"to {_MAX_TIMEOUT}")
    if after > timeout / 2:
        raise ValueError(f"stall_report_after={after!r} must be at most half of timeout={timeout!r}, so that the "
                         f"report comes before the ranks give up waiting")
    return float(after)


class DualPipe(nn.Module):
    """DualPipe on `process_group` (default: the world; Gloo or NCCL): rank r runs modules[0] as stage r of the
    micro-batches entering at rank 0 and modules[1] as stage R-1-r of those entering at rank R-1 (two copies of
    every stage).

    rank_mapping[i] is the pipeline rank of the group's rank i (default: the same). `timeout` (seconds) bounds
    every wait: a stuck or dead peer raises RuntimeError naming its rank instead of hanging. `defer_weight_grads`
    runs parameter gradients at the schedule's W actions (False: all at the input-gradient action). `dp_group`:
    the ranks holding the same stages in the other data-parallel replicas of this pipeline, for reduce_gradients().
    `record_actions`: keep each step's action times (last_step_actions()).

    `stall_report_after` (seconds: 0, or 1 to half the timeout; default: 10, cut to half the timeout and off where
    that is under a second): when a step makes no progress for this
    long, the group's rank 0 prints one report to stderr naming the rank everyone waits on and what it does ("rank
    0 waits for 1SEND_B3 from rank 1 (5.0 s); rank 1 is inside 1F3 for 5.2 s"); 0: only on SIGUSR1.
    `stall_report_dir`: each rank also writes its state there (stall-rank<N>.json), rank 0 the report
    (stall-report.json). Ranks are the group's. docs/runtime.md, "Stalls".

    Modules wrapped in FSDP2 (fully_shard over their data-parallel replicas) have their gradients reduce-scattered
    over that mesh once, after the step's last W (dualpipe/fsdp.py); reduce_gradients() is then not needed for them.
    """

    _kind = "dualpipe"

    def __init__(self, modules: Sequence[nn.Module], batch_dim: int = 0,
                 process_group: Optional[dist.ProcessGroup] = None, rank_mapping: Optional[List[int]] = None,
                 timeout: float = 300.0, defer_weight_grads: bool = True,
                 dp_group: Optional[dist.ProcessGroup] = None, record_actions: bool = False,
                 stall_report_after: Optional[float] = None, stall_report_dir: Optional[str] = None) -> None:
        super().__init__()
        try:  # a list, a tuple, or a container module (nn.Sequential, nn.ModuleList) of the two
            modules = list(modules)
        except TypeError:
            raise ValueError(f"modules={modules!r} must be a list or tuple of two nn.Modules "
                             f"({self._module_rule()})") from None
        if len(modules) != 2 or not all(isinstance(m, nn.Module) for m in modules):
            raise ValueError(f"{type(self).__name__} takes two nn.Modules per rank ({self._module_rule()}), "
                             f"got {len(modules)} {'module' if len(modules) == 1 else 'modules'}")
        self.module = nn.ModuleList(modules)
        if not _is_int(batch_dim):
            raise ValueError(f"batch_dim={batch_dim!r} must be an int (the dimension of the inputs that holds the "
                             f"batch)")
        self.batch_dim = batch_dim
        for name, group in (("process_group", process_group), ("dp_group", dp_group)):
            if group is not None and not isinstance(group, dist.ProcessGroup):
                raise ValueError(f"{name}={group!r} must be a torch.distributed ProcessGroup or None")
        self.group = process_group or dist.distributed_c10d._get_default_group()
        self._backend = str(dist.get_backend(self.group))
        self.num_ranks = self.group.size()
        if rank_mapping is None:
            rank_mapping = list(range(self.num_ranks))
        if (not isinstance(rank_mapping, (list, tuple)) or not all(_is_int(r) for r in rank_mapping)
                or sorted(operator.index(r) for r in rank_mapping) != list(range(self.num_ranks))):
            raise ValueError(f"rank_mapping {rank_mapping} must list each pipeline rank 0..{self.num_ranks - 1} once "
                             f"(entry i is the pipeline rank of the group's rank i)")
        self.rank = rank_mapping[self.group.rank()]
        # Ours maps the other way: pipeline rank -> rank in the group.
        self._group_ranks = [rank_mapping.index(r) for r in range(self.num_ranks)]
        # The runtime's waits count whole milliseconds: 1e-4 s became a wait of 0 ms, failing every step.
        if (not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not math.isfinite(timeout)
                or not 0.001 <= timeout <= _MAX_TIMEOUT):
            raise ValueError(f"timeout={timeout!r} must be a number of seconds from 0.001 (the waits count "
                             f"milliseconds) to {_MAX_TIMEOUT}")
        self.timeout = timeout
        self.stall_report_after = _stall_report_after(stall_report_after, timeout)
        if stall_report_dir is not None:
            if not isinstance(stall_report_dir, (str, os.PathLike)):
                raise ValueError(f"stall_report_dir={stall_report_dir!r} must be a directory's path or None")
            try:
                os.makedirs(stall_report_dir, exist_ok=True)
            except OSError as error:
                raise ValueError(f"stall_report_dir={stall_report_dir!r} cannot be created: {error.strerror}") from None
            if not os.access(stall_report_dir, os.W_OK):
                raise ValueError(f"stall_report_dir={stall_report_dir!r} is not a writable directory")
        self.stall_report_dir = stall_report_dir or ""
        _check_flag("defer_weight_grads", defer_weight_grads)
        self.defer_weight_grads = defer_weight_grads
        self.dp_group = dp_group
        self._pipelines = {}  # num_chunks -> _runtime.Pipeline
        self.record_actions = record_actions
        kind = type(modules[0])
        self._hook = (kind.overlapped_forward_backward
                      if kind is type(modules[1]) and hasattr(kind, "overlapped_forward_backward") else None)
        fsdp.check_meshes(modules, self.group)
        self._sharded = fsdp.sharded(modules)  # FSDP2 modules: their gradients reduced after the step
        self._weights = utils._WeightBatches()  # the executor's hands on dualpipe.utils.WeightGradStore
        self._last = None  # the pipeline of the last step
        self._held = None  # _placement()
        _alive.add(self)

    @property
    def record_actions(self) -> bool:
        """Whether steps keep their action times for last_step_actions(); may be changed between steps."""
        return self._record_actions

    @record_actions.setter
    def record_actions(self, on: bool) -> None:
        _check_flag("record_actions", on)
        self._record_actions = on
        for pipeline in self._pipelines.values():  # built before: told now (they were built with the old value)
            pipeline.set_recording(on)

    def _module_rule(self) -> str:
        return "module 0 is stage r, module 1 is stage R-1-r"

    def _placement(self) -> Tuple[List[int], List[List[int]]]:
        """This rank's stages in the order of its modules, and the ranks holding another copy of each: the runtime's
        placement of the kind (asked once: reduce_gradients() reads it every step)."""
        if self._held is None:
            self._held = _runtime.stages_of_rank(self._kind, self.num_ranks, self.rank)
        return self._held

    def _stages(self) -> Tuple[int, ...]:
        return tuple(self._placement()[0])

    def _pipeline(self, num_chunks: int):
        if num_chunks not in self._pipelines:
            stages = dict(zip(self._stages(), self.module))
            device = next(iter(self.parameters()), torch.empty(0)).device
            if "nccl" in self._backend and device.type != "cuda":
                raise ValueError(f"{type(self).__name__} over an NCCL group needs its modules on a CUDA device, "
                                 f"found them on {device}: move them (module.cuda()) or give a Gloo group")
            self._check_same_num_chunks(num_chunks)
            self._pipelines[num_chunks] = _runtime.Pipeline(
                self._kind, num_chunks, stages, self._hook, _split_pairs(self._hook), self.group, self._group_ranks,
                float(self.timeout), _p2p["shapes"], _p2p["dtype"], device, _channels(self.group, self._backend),
                _monitor(self.group, _pipelines_built[self.group.group_name]),
                self._weights if self.defer_weight_grads else None, self.record_actions,
                self.stall_report_after, self.stall_report_dir)
        return self._pipelines[num_chunks]

    def _let_go(self) -> None:
        """At the program's end: ends the pipelines' threads and lets go of the process groups."""
        for pipeline in self._pipelines.values():
            pipeline.close()
        self._pipelines.clear()
        self._last = None
        self.group = self.dp_group = None

    def _check_same_num_chunks(self, num_chunks: int) -> None:
        """Every rank of the group builds its pipeline for a num_chunks at the same step, in the same order, with
        the same declared message shapes (_rendezvous.py)."""
        name = self.group.group_name
        _pipelines_built[name] = _pipelines_built.get(name, 0) + 1
        declared = f"{[list(shape) for shape in _p2p['shapes']]} of {_p2p['dtype']}" if _p2p["shapes"] else "none"
        _rendezvous.agree(dist.distributed_c10d._get_default_store(), f"dualpipe/num_chunks/{name}/"
                          f"{_pipelines_built[name]}", self.rank, self.num_ranks, num_chunks, declared, self.timeout)

    @property
    def transport(self) -> Optional[str]:
        """What carried the last step's messages: "direct links" (a Gloo group: sockets of the pipeline's own
        between the ranks, DUALPIPE_DIRECT_LINKS=0 for none), "process group" (the group's own send and recv) or
        "directional channels" (NCCL, or DUALPIPE_NCCL_RULES=1); None before the first step."""
        return self._last.transport if self._last is not None else None

    def last_step_actions(self) -> List[Tuple[str, float, float]]:
        """This rank's actions of the last step, as (action, start, end) in time.monotonic() seconds, in the order
        they ran (with record_actions=True; else empty)."""
        return self._last.last_step_actions() if self._last is not None else []

    def reduce_gradients(self) -> None:
        """Sums the parameter gradients that belong together, in place: under DualPipe the two copies of every
        stage (stage r's on ranks r and R-1-r), then, with a dp_group, the data-parallel replicas. Afterwards every
        copy holds the gradient of the whole batch, as one process running it would. Call after step()."""
        params = [[p for p in m.parameters() if p.requires_grad] for m in self.module]
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params[0] + params[1]]
        if not grads:
            return
        flat = torch.cat([g.reshape(-1) for g in grads])
        flat = self._sum_stage_copies(flat, sum(p.numel() for p in params[0]))
        if self.dp_group is not None:
            dist.all_reduce(flat, group=self.dp_group)
        for p, g in zip(params[0] + params[1], flat.split([p.numel() for p in params[0] + params[1]])):
            if p.grad is None:
                p.grad = g.view_as(p).clone()
            else:
                p.grad.copy_(g.view_as(p))

    def _sum_stage_copies(self, flat: torch.Tensor, first: int) -> torch.Tensor:
        """Where the placement holds a second copy of this rank's stages (DualPipe: module 0 here, the first `first`
        values of `flat`, is module 1 on the peer, and the other way round), adds the peer's gradients of them."""
        copies = self._placement()[1]
        if not any(copies):
            return flat  # one copy of every stage (DualPipeV)
        peer = dist.get_global_rank(self.group, self._group_ranks[copies[0][0]])
        theirs = torch.empty_like(flat)
        for work in dist.batch_isend_irecv([dist.P2POp(dist.isend, flat, peer, self.group),
                                            dist.P2POp(dist.irecv, theirs, peer, self.group)]):
            work.wait()
        their_first = flat.numel() - first  # their module 0 is our module 1
        return torch.cat([flat[:first] + theirs[their_first:], flat[first:] + theirs[:their_first]])


    def step(self, *inputs: Optional[torch.Tensor], num_chunks: int = 0, criterion: Optional[Callable] = None,
             labels: Optional[Sequence[Optional[torch.Tensor]]] = (), return_outputs: bool = False
             ) -> Tuple[Optional[torch.Tensor], Outputs]:
        """One training step (or, under torch.no_grad(), inference) over `num_chunks` micro-batches.

        Ranks where micro-batches enter pass `inputs` (their share of the batch, cut along batch_dim); ranks that
        compute losses pass `labels` and `criterion`, called as criterion(*outputs, *labels) per micro-batch and
        returning a one-element tensor. Returns (loss, outputs) there: the micro-batches' losses stacked, and the
        last stage's outputs joined along batch_dim when return_outputs; (None, None) on the other ranks.
        Parameter gradients accumulate (the sum over micro-batches), as with loss.backward().
        """
        if not isinstance(num_chunks, int) or isinstance(num_chunks, bool) or num_chunks <= 0:
            raise ValueError(f"num_chunks={num_chunks!r}: give the number of micro-batches, a positive integer")
        if not _stepping.acquire(blocking=False):
            raise RuntimeError(f"{type(self).__name__}.step(): a step is already running in another thread of this "
                               "process; steps run one at a time (WeightGradStore is the process's one queue, as in "
                               "the reference): call step() from one thread, or wait for the other to return")
        phases.step_timeout = self.timeout  # the phases' exchanges wait as long as the pipeline's messages
        try:
            return self._step(inputs, num_chunks, criterion, () if labels is None else labels, return_outputs)
        finally:
            phases.step_timeout = None
            _stepping.release()

    def _step(self, inputs, num_chunks, criterion, labels, return_outputs):
        self._weights.use(utils.WeightGradStore)  # a program may have put the reference's class there
        pipeline = self._pipeline(num_chunks)
        entering, owned = pipeline.entering_microbatches, pipeline.loss_microbatches
        training = torch.is_grad_enabled()
        try:
            if owned and training and criterion is None:
                raise ValueError(f"rank {self.rank} computes the loss of {len(owned)} micro-batches: step() needs a "
                                 f"criterion there when training")
            chunks = _scatter(inputs, len(entering), self.batch_dim) if entering else []
            chunk_labels = _scatter(labels, len(owned), self.batch_dim) if owned and criterion is not None else []
        except ValueError as refused:  # the peers wait for this rank's messages: they learn why now
            pipeline.refuse(str(refused))
            raise
        self._weights.reset()
        if training:
            fsdp.defer_reduction(self._sharded)
        try:
            # Ctrl-C ends the step's waits where Python's default handler would raise KeyboardInterrupt; a handler
            # of the program's own (a graceful stop at a step boundary) is left to run when the step returns.
            interruptible = signal.getsignal(signal.SIGINT) is signal.default_int_handler
            losses, outputs = pipeline.step(chunks, chunk_labels, criterion, return_outputs, interruptible)
        finally:
            # A failed step leaves no deferred work behind; a complete one has run all of it.
            left = len(self._weights.store.cache)
            self._weights.reset()
        if left:  # after a complete step: put while the store was not enabled, so no W action ran them
            raise RuntimeError(f"{left} weight-gradient closures were put in WeightGradStore outside an I action "
                               "(while WeightGradStore.enabled was False) and never ran: their gradients are missing; "
                               "put only when enabled, and compute the gradient at once otherwise")
        self._last = pipeline
        if training:
            fsdp.reduce_gradients(self._sharded)
        if not owned:
            return None, None
        loss = torch.stack(losses) if criterion is not None else None
        return loss, (_gather(outputs, self.batch_dim) if return_outputs else None)


class DualPipeV(DualPipe):
    """DualPipeV, the V-shaped half of DualPipe: rank r runs modules[0] as stage r and modules[1] as stage 2R-1-r of
    one model cut into 2R stages; every micro-batch enters and leaves at rank 0 (inputs, labels and the loss there).
    """

    _kind = "dualpipev"

    def _module_rule(self) -> str:
        return "module 0 is stage r, module 1 is stage 2R-1-r"

