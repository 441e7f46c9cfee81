"""deepseek-ai/DualPipe's `dualpipe.utils` protocol for deferred weight gradients, on dualpipe's executor.

Code written for the reference keeps working with its import changed:

    from dualpipe.utils import WeightGradStore, run_backward

    class LinearFunc(torch.autograd.Function):
        @staticmethod
        def backward(ctx, grad_output):
            ...
            if WeightGradStore.enabled:
                WeightGradStore.put(grad_weight_fn)     # run at this backward's W action
            else:
                grad_weight_fn()

The semantics are the reference's: `enabled` is on only while an input-gradient (I) action's backward runs; each I
flushes what was put during it as one batch (`flush`), which the matching W action pops and runs; a failed step
clears the store. Modules without such Functions need none of this: `DualPipe` splits their backward through the
autograd graph (docs/python.md, "Weight gradients at W").
"""
from __future__ import annotations

import queue
from typing import Callable, List, Sequence

import torch

__all__ = ["WeightGradStore", "run_backward"]


class WeightGradStore:
    """Weight-gradient closures put aside during an I action and run at its W (class-level state, as the
    reference's: one store per process)."""

    enabled: bool = False
    cache: List[Callable[[], None]] = []
    funcs_queue: "queue.Queue[List[Callable[[], None]]]" = queue.Queue()

    @classmethod
    def put(cls, func: Callable[[], None]) -> None:
        cls.cache.append(func)

    @classmethod
    def flush(cls) -> None:
        cls.funcs_queue.put(cls.cache)
        cls.cache = []

    @classmethod
    def pop(cls) -> None:
        """Runs the oldest flushed batch."""
        if cls.funcs_queue.empty():
            raise RuntimeError("WeightGradStore.pop: no flushed batch to run (pop without a flush)")
        for func in cls.funcs_queue.get():
            func()

    @classmethod
    def clear(cls) -> None:
        cls.enabled = False
        cls.cache = []
        cls.funcs_queue = queue.Queue()


# The members a weight-gradient store has: the reference's public protocol, all the executor uses of it.
_STORE_MEMBERS = ("enabled", "cache", "funcs_queue", "put", "flush", "pop", "clear")


class _WeightBatches:
    """What dualpipe's executor calls (dualpipe._runtime) around each I action and at its W, on whichever store
    `dualpipe.utils.WeightGradStore` names at the step: ours, or a program's own copy of the reference's class
    assigned there. Only the public protocol is used, so both behave alike; the batch of an I is run by its own W,
    whatever order the schedule gives the Ws."""

    def __init__(self) -> None:
        self.store = WeightGradStore

    def use(self, store) -> None:
        """Takes `store` for the next step, refusing up front one that lacks the protocol."""
        missing = [name for name in _STORE_MEMBERS if not hasattr(store, name)]
        if not missing and not isinstance(store.funcs_queue, queue.Queue):
            missing = ["funcs_queue as a queue.Queue"]
        if missing:
            raise ValueError(f"dualpipe.utils.WeightGradStore={store!r} lacks {', '.join(missing)}: a weight-gradient "
                             f"store has the reference's members ({', '.join(_STORE_MEMBERS)}), funcs_queue a "
                             "queue.Queue; assign the reference's class or ours there")
        self.store = store

    def reset(self) -> None:
        self.store.clear()
        self.store.enabled = False

    def _begin(self) -> None:
        self.store.enabled = True

    def _end(self) -> List[Callable[[], None]]:
        self.store.enabled = False
        batch = self.store.cache
        self.store.flush()
        return batch

    def _run(self, batch: List[Callable[[], None]]) -> None:
        funcs_queue = self.store.funcs_queue
        with funcs_queue.mutex:
            pending = funcs_queue.queue
            index = next((i for i, b in enumerate(pending) if b is batch), None)
            if index is None:
                raise RuntimeError("WeightGradStore: the batch of this W action was popped or cleared before it")
            del pending[index]
        for func in batch:
            func()


def run_backward(tensors: Sequence[torch.Tensor], grad_tensors: Sequence[torch.Tensor]) -> None:
    """The reference's backward call for a hook: accumulates into .grad, frees the graph, and accepts tensors that
    nothing reaches."""
    torch.autograd.Variable._execution_engine.run_backward(
        tuple(tensors), tuple(grad_tensors), keep_graph=False, create_graph=False, allow_unreachable=True,
        accumulate_grad=True)
