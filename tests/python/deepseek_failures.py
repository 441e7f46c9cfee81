"""A failure on one of two ranks of dualpipe.DualPipeV over Gloo, as the other rank sees it:

    module          rank 1's module raises: rank 1 gets its own exception, rank 0 an error naming rank 1 and why
    backward        rank 1's backward raises: the same, rank 0's error naming the kind (KeyError) too
    num_chunks      the ranks step with different num_chunks: both raise ValueError naming the two values
    shapes          the ranks declare different set_p2p_tensor_shapes: both raise ValueError naming them (Gloo
                    aborted the receiving rank)
    detached loss   rank 0's loss is outside the autograd graph: ValueError naming the micro-batch on rank 0, and
                    ValueError naming rank 0 and the rule on rank 1 (the failure travels, with its kind)
    lives on        the same, with rank 0 staying alive past the timeout after its error (a program that catches
                    it): rank 1 learns of it from rank 0 at once, not from its own timeout or rank 0's exit
    refused         rank 0 (which computes the losses) steps without a criterion and lives on: ValueError there, and
                    rank 1 learns it at once (ValueError naming rank 0's rule), not at its timeout
    interrupt       Ctrl-C (SIGINT) on rank 0 while it waits on rank 1, whose module takes 10 s: rank 0 raises
                    KeyboardInterrupt before rank 1 could have answered, rank 1 an error saying rank 0 was interrupted
    own handler     the same SIGINT with a handler of the program's own: the step is not cut short, the handler ran
    interrupt at start  Ctrl-C on rank 0 while its first step waits for rank 1, which starts 4 s late: rank 0 raises
                    KeyboardInterrupt at once, rank 1 (when it comes) an error saying rank 0 was interrupted
    stall           rank 1's module sleeps 3 s once, with stall_report_after=1: the step completes, and rank 0's
                    report (stall-report.json) names rank 1 inside its forward of micro-batch 0 (1F0)

    python deepseek_failures.py      prints one line per rank and case, and exits 0 when every check passed"""
import json
import os
import signal
import sys
import tempfile
import threading
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import dualpipe

from rank_checks import check
from ranks import free_port, start_ranks

TIMEOUT = 10  # seconds, the pipeline's wait limit in every case
LINGER = 20  # seconds that rank 0 stays alive after its error in "lives on": past the timeout
SLOW = 10  # seconds that rank 1's module takes in "interrupt"
LATE = 4  # seconds that rank 1 starts its step late in "interrupt at start"
STALL = 3  # seconds that rank 1's module sleeps once in "stall"


class Stage(nn.Module):
    """x * weight, raising (`fail`) or sleeping (`seconds`) in its forward."""

    def __init__(self, fail=False, seconds=0.0):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(8))
        self.fail, self.seconds = fail, seconds

    def forward(self, x):
        if self.fail:
            raise KeyError("this stage fails on purpose")
        time.sleep(self.seconds)
        return x * self.weight


class SleepOnce(Stage):
    """Sleeps `seconds` in its first forward only."""

    def __init__(self, seconds):
        super().__init__(seconds=seconds)

    def forward(self, x):
        time.sleep(self.seconds)
        self.seconds = 0.0
        return x * self.weight


class _RaiseInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        raise KeyError("this stage's backward fails on purpose")


class FailsInBackward(Stage):
    """x * weight, raising in its backward."""

    def forward(self, x):
        return _RaiseInBackward.apply(x * self.weight)


def criterion(output, target):
    return F.mse_loss(output, target).clone()


def two_rank_step(rank, port, out, case):
    """One step of a two-rank DualPipeV that `case` breaks; writes the seconds taken and the error."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=2, rank=rank)
    slow = SLOW if case == "interrupt" else 0.5 if case == "own handler" else 0
    first = Stage(fail=case == "module" and rank == 1, seconds=slow if rank == 1 else 0)
    stalls = {}
    if case == "backward" and rank == 1:
        first = FailsInBackward()
    if case == "stall":
        first = SleepOnce(STALL if rank == 1 else 0)
        stalls = {"stall_report_after": 1, "stall_report_dir": os.path.dirname(out)}
    if case == "shapes":  # declared differently (rank 1's micro-batches hold 2 rows, not 3): Gloo aborted
        dualpipe.set_p2p_tensor_shapes([(2, 8)] if rank == 0 else [(3, 8)])
    model = dualpipe.DualPipeV((first, Stage()), timeout=TIMEOUT, **stalls)
    x = torch.randn(8, 8) if rank == 0 else None
    detached = case in ("detached loss", "lives on")
    loss_of = (lambda y, t: criterion(y, t).detach()) if detached else criterion
    if case == "refused" and rank == 0:
        loss_of = None  # the loss rank without a criterion: refused before its step begins
    num_chunks = 8 if case == "num_chunks" and rank == 1 else 4
    handled = []
    if rank == 0 and case == "interrupt":
        signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's own, as a plain script has
    if rank == 0 and case == "own handler":
        signal.signal(signal.SIGINT, lambda *_: handled.append(True))
    if rank == 0 and case in ("interrupt", "own handler", "interrupt at start"):
        threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
    if rank == 0 and case == "interrupt at start":
        signal.signal(signal.SIGINT, signal.default_int_handler)
    start = time.monotonic()
    if rank == 1 and case == "interrupt at start":
        time.sleep(LATE)  # the late peer: rank 0 waits for it in the first step's rendezvous
    try:
        model.step(x, num_chunks=num_chunks, criterion=loss_of, labels=(x,))
        message = "no error"
    except BaseException as e:  # noqa: BLE001 - the type and text are what is checked (KeyboardInterrupt too)
        message = f"{type(e).__name__}: {e}"
    if handled:
        message += " (the program's handler ran)"
    with open(f"{out}.{rank}", "w") as f:
        f.write(f"{time.monotonic() - start:.1f}\n{message}")
    if rank == 0 and case == "lives on":
        time.sleep(LINGER)
    if rank == 0 and case == "refused":
        time.sleep(3)  # lives on: its peer learns of the refusal from it, not from its exit
    if rank == 0 and case == "interrupt at start":
        time.sleep(LATE + 2)  # the store (rank 0's) stays for the late peer to read rank 0's word


def two_rank_results(case):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rank")
        start_ranks(two_rank_step, (free_port(), out, case), 2)
        results = [open(f"{out}.{r}").read().split("\n", 1) for r in range(2)]
        report = os.path.join(tmp, "stall-report.json")
        if case == "stall":
            check(os.path.exists(report), "stall: rank 0 wrote no stall-report.json")
            stall = json.load(open(report))
            print(f"stall: {stall['headline']}")
            check((stall["cause"], stall["rank"], stall["action"]) == ("inside_action", 1, "1F0"),
                  f"stall: the report names {stall['cause']}, rank {stall['rank']}, {stall['action']!r}")
    for rank, (seconds, message) in enumerate(results):
        print(f"{case}: rank {rank} after {seconds} s: {message.splitlines()[0]}")
    for seconds, _ in results:
        check(float(seconds) < 6 * TIMEOUT, f"{case}: a rank waited past the timeout")
    return [(float(seconds), message) for seconds, message in results]


def main():
    (_, other), (_, own) = two_rank_results("module")  # rank 1 fails
    check(own.startswith("KeyError") and "on purpose" in own, f"rank 1 lost its own exception: {own}")
    check(other.startswith("RuntimeError") and "rank 1" in other and "on purpose" in other,
          f"rank 0's error does not name rank 1 and why: {other}")

    (_, other), (_, own) = two_rank_results("backward")  # rank 1's backward fails
    check(own.startswith("KeyError") and "on purpose" in own, f"rank 1 lost its own backward's exception: {own}")
    check(other.startswith("RuntimeError") and "rank 1" in other and "KeyError" in other and "on purpose" in other,
          f"rank 0's error does not name rank 1, the kind of its error and why: {other}")

    for _, message in two_rank_results("num_chunks"):
        check(message.startswith("ValueError: num_chunks differs between the pipeline's ranks: [4, 8]"),
              f"a num_chunks mismatch reads {message}")

    for _, message in two_rank_results("shapes"):
        check(message.startswith("ValueError: set_p2p_tensor_shapes differs between the pipeline's ranks: "
                                 "['[[2, 8]] of torch.float32', '[[3, 8]] of torch.float32']"),
              f"differing declared shapes read {message}")

    for case in ("detached loss", "lives on"):
        (_, own), (_, other) = two_rank_results(case)
        check(own.startswith("ValueError: the loss of micro-batch 0 does not require grad"),
              f"{case}: the loss rank's error reads {own}")
        check(other.startswith("ValueError") and "rank 0: the loss of micro-batch 0 does not require grad" in other,
              f"{case}: the other rank's error is not rank 0's ValueError: {other}")

    (_, own), (seconds, other) = two_rank_results("refused")
    check(own.startswith("ValueError: rank 0 computes the loss of 4 micro-batches: step() needs a criterion"),
          f"the refusing rank's error reads {own}")
    check(other.startswith("ValueError") and "rank 0 computes the loss of 4 micro-batches" in other and seconds < 2,
          f"the refusing rank's peer reads, after {seconds} s: {other}")

    (seconds, own), (_, other) = two_rank_results("interrupt")
    check(own.startswith("KeyboardInterrupt"), f"Ctrl-C on a waiting rank gave {own}")
    check(seconds < SLOW, f"Ctrl-C took {seconds} s: the rank waited for its peer's answer")
    check(other.startswith("RuntimeError") and "rank 0 was interrupted" in other,
          f"the interrupted rank's peer reads {other}")

    (seconds, own), (_, other) = two_rank_results("interrupt at start")
    check(own.startswith("KeyboardInterrupt"), f"Ctrl-C in the first step's rendezvous gave {own}")
    check(seconds < LATE, f"Ctrl-C in the first step's rendezvous took {seconds} s: the rank waited for its peer")
    check(other.startswith("RuntimeError: rank 1: rank 0 was interrupted (KeyboardInterrupt) before its first step"),
          f"the late peer of an interrupted rank reads {other}")

    for _, message in two_rank_results("stall"):
        check(message == "no error", f"a stalled step that goes on: {message}")

    (_, own), (_, other) = two_rank_results("own handler")
    check(own == "no error (the program's handler ran)", f"a program's own SIGINT handler: {own}")
    check(other == "no error", f"the peer of a rank with its own SIGINT handler: {other}")
    print("failure: every check passed")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
