"""The two chains of an overlapped pair (`dualpipe.overlap_moe`): threads that take turns, and where a chain gives
the turn. The rules are in moe_overlap's docstring; this module holds their mechanics."""
import atexit
import threading
import time
from typing import Callable, Dict, List, Optional, Tuple

import torch.distributed as dist
import torch.nn as nn

from . import phases

_local = threading.local()  # .chain: the chain this thread runs, if any
_groups: Dict[Tuple[object, str], dist.ProcessGroup] = {}  # (a layer's group, a chain's role): the chain's own
atexit.register(_groups.clear)  # let go of them at the program's end (deepseek.py, _close_pipelines, says why)
_last_runs: Dict[Tuple[int, str], "Timeline"] = {}  # (id of the stage, a chain's role): that chain's last run
# How long an all-to-all takes from its issue to its arrival, from the last ones a chain found not arrived.
_exchange_times: List[float] = []
_KEEP, _BLOCKED = 32, 1e-4


def current() -> Optional["Chain"]:
    """The chain the calling thread runs, if any."""
    return getattr(_local, "chain", None)


def _exchange_seconds() -> float:
    return sorted(_exchange_times)[len(_exchange_times) // 2] if _exchange_times else float("inf")


class Timeline:
    """A chain's computing time (its turns, less its waits for exchanges) at each of its yield points and exchanges:
    from the last run of the same chain, how long it computes from a yield point to its next exchange or its end."""

    def __init__(self):
        self.yield_points: List[float] = []
        self.exchanges: List[float] = []
        self.end = 0.0

    def computing_left(self, yield_point: int) -> float:
        if yield_point >= len(self.yield_points):
            return 0.0
        at = self.yield_points[yield_point]
        return next((t for t in self.exchanges if t >= at), self.end) - at


class Chain:
    """Runs `fn` on a thread of its own, a turn at a time: a turn ends where `fn` issues an exchange that gives the
    turn, reaches a yield point where giving it is worth it, or returns."""

    def __init__(self, fn: Callable, role: str, every_exchange: bool, stage: nn.Module):
        self.fn, self.role, self.every_exchange, self.stage = fn, role, every_exchange, stage
        self.inside_exchange_part = 0  # > 0 while a forward runs a MoE layer's dispatch or combine
        self.exchange = None  # the all-to-all this chain waits for while paused, if any
        self.other: Optional["Chain"] = None  # the other chain of the pair
        self.last_run = _last_runs.get((id(stage), role))
        self.timeline = Timeline()  # this run's, kept as the last run when the pair ends well
        self._computed, self._since = 0.0, 0.0  # computing time before the current turn; the turn's start
        self._turn_began = 0.0  # computing time when the current turn began
        self.result = self.error = None
        self.done = False
        self._go, self._back = threading.Semaphore(0), threading.Semaphore(0)
        self._thread = threading.Thread(target=self._main, daemon=True, name="dualpipe-overlap")
        self._thread.start()

    def _main(self):
        _local.chain = self
        self._go.acquire()
        self._since = time.perf_counter()
        try:
            self.result = self.fn()
            self.timeline.end = self.computing_time()
        except BaseException as error:  # noqa: BLE001 - raised again on the calling thread
            self.error = error
        finally:
            self.done = True
            self._back.release()

    def turn(self):
        """From the driving thread: runs the chain until it gives the turn back, or its end."""
        self._go.release()
        self._back.acquire()

    def pause(self):
        """From the chain's thread: gives the turn back."""
        self._computed = self.computing_time()
        self._back.release()
        self._go.acquire()
        self._since = time.perf_counter()
        self._turn_began = self._computed

    def computing_time(self) -> float:
        return self._computed + time.perf_counter() - self._since

    def yields_at_exchanges(self) -> bool:
        return self.every_exchange or self.inside_exchange_part > 0

    def group_of(self, group) -> dist.ProcessGroup:
        """This chain's own group of the same ranks as `group`, made by the group's ranks on their first exchange in
        a pair: both chains' groups at once, in one order, since a group's name comes from its ranks and the groups
        of the same ranks made before it."""
        group = group if group is not None else dist.group.WORLD
        if (group, self.role) not in _groups:
            for role in ("backward", "forward"):
                _groups[(group, role)] = dist.new_group(dist.get_process_group_ranks(group),
                                                        use_local_synchronization=True,
                                                        group_desc=f"dualpipe overlap_moe {role} chain")
        return _groups[(group, self.role)]

    def at_once(self, issue: Callable) -> None:
        """From the chain's thread: an exchange that keeps the turn; its time counts as waiting."""
        since = time.perf_counter()
        issue()
        self._computed -= time.perf_counter() - since

    def give_turn_during(self, work) -> None:
        """From the chain's thread: the other chain computes while `work` travels; then waits for it."""
        issued = time.perf_counter()
        self.timeline.exchanges.append(self.computing_time())
        self.exchange = work
        self.pause()
        self.exchange = None
        since = time.perf_counter()
        phases.wait_within_step(work, "an all-to-all of the overlapped MoE block")
        self._computed -= time.perf_counter() - since
        if time.perf_counter() - since > _BLOCKED:
            _exchange_times.append(time.perf_counter() - issued)
            del _exchange_times[:-_KEEP]

    def worth_giving_turn(self) -> bool:
        """At a yield point: whether the other chain waits for an exchange that has mostly arrived (this turn computed
        for half an exchange's time) and, by this chain's last run, what is left to compute before its next exchange
        or its end would hide at least half of the other's next one."""
        point = len(self.timeline.yield_points)
        now = self.computing_time()
        self.timeline.yield_points.append(now)
        other, half_exchange = self.other, _exchange_seconds() / 2
        return (self.last_run is not None and other is not None and other.exchange is not None
                and now - self._turn_began >= half_exchange and self.last_run.computing_left(point) >= half_exchange)


def run(backward: Chain, forward: Chain) -> None:
    """Runs the pair's two chains to their ends, the backward's turn first (DeepSeek's order); raises what one
    raised. Keeps each chain's timeline for the next run of the same stage and role."""
    backward.other, forward.other = forward, backward
    live = [backward, forward]
    while live:
        for chain in list(live):
            chain.turn()
            if chain.done:
                live.remove(chain)
    for chain in (backward, forward):
        if chain.error is not None:
            raise chain.error
    for chain in (backward, forward):
        _last_runs[(id(chain.stage), chain.role)] = chain.timeline
