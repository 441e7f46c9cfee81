"""The checks of deepseek-ai/DualPipe's examples (example_dualpipe.py, example_dualpipev.py), rewritten for
dualpipe.DualPipe and dualpipe.DualPipeV on CPU over Gloo, with the reference's model and sizes: every stage is
Linear(512, 2048) -> GELU -> Linear(2048, 512) without bias through the reference's custom autograd Function, which
defers its weight gradients through dualpipe.utils.WeightGradStore, 20 micro-batches of 3 sequences of 256
positions, float32, and the module class defines overlapped_forward_backward.

    python deepseek_examples.py dualpipe|dualpipev [--ranks 4] [--device cpu|cuda] [--nccl-rules]
                               [--hidden 512] [--seq-len 256] [--reference-store]
                                                                 each rank checks its losses, outputs and gradients
                                                                 against one process running the whole model (run
                                                                 once, before the ranks start), and that every
                                                                 deferred weight gradient ran once, at its W action
                                                                 --reference-store: the program keeps its own copy
                                                                 of the reference's WeightGradStore class and puts
                                                                 it in dualpipe.utils, as a port from the reference
                                                                 may; the same checks hold
    python deepseek_examples.py errors                           the errors of bad input, on one process
Prints one line per check and exits 0 when every rank passed. --nccl-rules runs the pipeline under NCCL's rules on
Gloo (DUALPIPE_NCCL_RULES=1: two directional channels, every message matched by order alone)."""
import argparse
import os
import queue
import re
import sys
import tempfile
import threading
import time
from typing import Callable, List

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import dualpipe
from dualpipe.utils import WeightGradStore, run_backward

from rank_checks import check, cosine_distance as cal_diff  # cal_diff: the reference examples' name
from ranks import free_port, start_ranks

NUM_CHUNKS, MICRO_BATCH_SIZE = 20, 3
SEQ_LEN, HIDDEN_SIZE = 256, 512  # the reference's; --seq-len and --hidden shrink them for 8 ranks on 2 cores
hook_calls = 0  # overlapped_forward_backward calls in this process
hook_losses = 0  # ... of which computed the forward's loss (criterion0 given)
# Every weight-gradient computation: [time put aside (None: run where computed), times run]; checked against the
# training step's action times.
weight_grads = []


class ReferenceWeightGradStore:
    """deepseek-ai/DualPipe's dualpipe/utils.py WeightGradStore as published (MIT licence, Copyright (c) 2025
    DeepSeek): the class a program ported from the reference may keep and hand to dualpipe (--reference-store)."""

    enabled: bool = False
    cache: List[Callable] = []
    funcs_queue = queue.Queue()

    @classmethod
    def put(cls, func: Callable) -> None:
        cls.cache.append(func)

    @classmethod
    def flush(cls) -> None:
        cls.funcs_queue.put(cls.cache)
        cls.cache = []

    @classmethod
    def pop(cls) -> None:
        assert not cls.funcs_queue.empty(), "Pop empty queue."
        funcs = cls.funcs_queue.get()
        for func in funcs:
            func()

    @classmethod
    def clear(cls) -> None:
        cls.cache = []
        cls.funcs_queue = queue.Queue()


def use_reference_store():
    """The program's LinearFunc and dualpipe's executor both take the reference's class from here on."""
    global WeightGradStore
    WeightGradStore = ReferenceWeightGradStore
    dualpipe.utils.WeightGradStore = ReferenceWeightGradStore


class LinearFunc(torch.autograd.Function):
    """The reference's: while WeightGradStore is enabled (an I action), the weight gradient is put aside for W."""

    @staticmethod
    def forward(ctx, input, weight):
        ctx.save_for_backward(input, weight)
        return F.linear(input, weight)

    @staticmethod
    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensors
        if weight.grad is None:
            weight.grad = torch.zeros_like(weight)
        record = [time.monotonic() if WeightGradStore.enabled else None, []]
        weight_grads.append(record)

        def grad_weight_fn():
            record[1].append(time.monotonic())
            weight.grad += grad_output.flatten(0, -2).T @ input.flatten(0, -2)

        if WeightGradStore.enabled:
            WeightGradStore.put(grad_weight_fn)
        else:
            grad_weight_fn()
        return grad_output @ weight, None


class MyLinear(nn.Linear):
    def forward(self, input):
        return LinearFunc.apply(input, self.weight)


class PipelineStage(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.linear1 = MyLinear(hidden_size, hidden_size * 4, bias=False)
        self.linear2 = MyLinear(hidden_size * 4, hidden_size, bias=False)

    def forward(self, x):
        return self.linear2(F.gelu(self.linear1(x)))

    @classmethod
    def overlapped_forward_backward(cls, module0, inputs0, criterion0, labels0, module1, loss1, outputs1,
                                    output_grads1):
        global hook_calls, hook_losses
        hook_calls += 1
        outputs0 = module0(*inputs0)
        outputs0 = [outputs0] if isinstance(outputs0, torch.Tensor) else outputs0
        if criterion0 is not None:
            hook_losses += 1
            loss0 = criterion0(*outputs0, *labels0)
        else:
            loss0 = None
        if loss1 is not None:
            loss1.backward()
            loss1.detach_()
        else:
            run_backward(outputs1, output_grads1)
        return outputs0, loss0


def criterion(output, target):
    return F.mse_loss(output, target).clone()


def ref_step(x, l, model, chunks):
    ys, losses = [], []
    for micro_x, micro_l in zip(x.chunk(chunks), l.chunk(chunks)):
        micro_y = model(micro_x)
        loss = criterion(micro_y, micro_l)
        loss.backward()
        ys.append(micro_y)
        losses.append(loss)
    return torch.stack(losses), torch.cat(ys, 0)


def whole_model_step(kind, pp_size, path):
    """The single-process reference, run once for every rank (the reference's example runs it on each): the seeded
    stages, inputs and labels, and one training step of the whole model over the micro-batches, saved to `path`
    with its losses, outputs and every stage's weight gradients. Same sizes, seed and thread count as the ranks, so
    that the losses can be compared with torch.equal."""
    torch.set_num_threads(1)
    torch.manual_seed(233)
    stages = pp_size if kind == "dualpipe" else pp_size * 2
    full_modules = nn.Sequential(*[PipelineStage(HIDDEN_SIZE) for _ in range(stages)])
    x = torch.randn(NUM_CHUNKS * MICRO_BATCH_SIZE, SEQ_LEN, HIDDEN_SIZE)
    l = torch.randn(NUM_CHUNKS * MICRO_BATCH_SIZE, SEQ_LEN, HIDDEN_SIZE)
    loss, outputs = ref_step(x, l, full_modules, NUM_CHUNKS)
    torch.save({"weights": [m.state_dict() for m in full_modules],
                "grads": [[p.grad for p in m.parameters()] for m in full_modules],
                "x": x, "l": l, "loss": loss.detach(), "outputs": outputs.detach()}, path)


def run_rank(rank, pp_size, kind, port, device, sizes, backend, reference_path):
    global SEQ_LEN, HIDDEN_SIZE
    SEQ_LEN, HIDDEN_SIZE = sizes
    if os.environ.get("DUALPIPE_EXAMPLE_REFERENCE_STORE"):
        use_reference_store()
    torch.set_num_threads(1)
    # Every tensor and module of the check, the single-process reference's included, on `device`. On a GPU the
    # ranks share it; Gloo carries the stage boundaries through host memory (NCCL takes one rank per GPU).
    torch.set_default_device(device)
    if device == "cuda":
        torch.cuda.set_device(0)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", world_size=pp_size, rank=rank)
    try:
        ref = torch.load(reference_path, map_location=device)
        actions = (check_dualpipe if kind == "dualpipe" else check_dualpipev)(rank, pp_size, ref)
        check(hook_calls > 0, f"rank {rank}: overlapped_forward_backward was never called")
        computes_losses = rank == 0 or (kind == "dualpipe" and rank == pp_size - 1)
        check(hook_losses > 0 if computes_losses else hook_losses == 0,
              f"rank {rank}: overlapped_forward_backward got criterion0 {hook_losses} times")
        at_w, put_aside = check_deferred_at_w(rank, actions)
        print(f"rank {rank}: {kind} losses equal, outputs equal, gradients within cosine distance 1e-13, "
              f"overlapped_forward_backward called {hook_calls} times ({hook_losses} with criterion0), "
              f"{at_w} weight gradients computed at W actions ({put_aside} put aside in WeightGradStore at their I), "
              f"none at an I", flush=True)
    finally:
        dist.destroy_process_group()


ACTION = re.compile(r"^(\d+)([IW])(\d+)$")


def check_deferred_at_w(rank, actions):
    """By the action times the executor recorded, in the training step: every weight gradient put aside ran exactly
    once, inside the W action of the I action it was put aside in (the same stage and micro-batch); none was
    computed inside an I action; and every W action computed some (what it deferred, or, on a first stage whose
    inputs need no gradient, its whole backward). Returns (weight gradients computed at W, of which put aside)."""
    def action_at(t):
        found = [a for a, start, end in actions if start <= t <= end]
        return found[0] if found else None

    step_start, step_end = actions[0][1], actions[-1][2]
    training = [(put, runs) for put, runs in weight_grads if runs and step_start <= runs[0] <= step_end]
    at_w, put_aside = {}, 0
    for put, runs in training:
        check(len(runs) == 1, f"rank {rank}: a weight gradient ran {len(runs)} times")
        ran_in = action_at(runs[0])
        match = ACTION.match(ran_in or "")
        check(ran_in is not None and not (match and match.group(2) == "I"),
              f"rank {rank}: a weight gradient was computed in {ran_in}")
        if match and match.group(2) == "W":
            at_w[ran_in] = at_w.get(ran_in, 0) + 1
        if put is None:
            continue
        put_aside += 1
        at_i = ACTION.match(action_at(put) or "")
        check(at_i and at_i.group(2) == "I", f"rank {rank}: a weight gradient was put aside in {action_at(put)}")
        check(match and match.group(2) == "W" and match.group(1, 3) == at_i.group(1, 3),
              f"rank {rank}: the weight gradient put aside in {at_i.group(0)} ran in {ran_in}")
    w_actions = [a for a, _, _ in actions if ACTION.match(a) and ACTION.match(a).group(2) == "W"]
    check(w_actions, f"rank {rank}: the schedule ran no W action")
    idle = [a for a in w_actions if a not in at_w]
    check(not idle, f"rank {rank}: W actions that computed no weight gradient: {idle}")
    return sum(at_w.values()), put_aside


def local_copies(ref, stages):
    """This rank's stages with the reference's weights, and the reference's gradients of their parameters."""
    local = nn.Sequential(*[PipelineStage(HIDDEN_SIZE) for _ in stages])
    for module, s in zip(local, stages):
        module.load_state_dict(ref["weights"][s])
    return local, [g for s in stages for g in ref["grads"][s]]


def check_gradients(rank, local_modules, ref_grads):
    for (n, p), p_ref_grad in zip(local_modules.named_parameters(), ref_grads):
        diff = cal_diff(p.grad, p_ref_grad)
        check(diff < 1e-13, f"rank {rank}: gradient of {n}: cosine distance {diff} to one process")


def check_inference(rank, model, x, l, expected):
    """A no_grad step with return_outputs: `expected` (loss, outputs) on ranks that compute losses, else None."""
    with torch.no_grad():
        loss, outputs = model.step(x, num_chunks=NUM_CHUNKS, criterion=criterion, labels=(l,), return_outputs=True)
    if expected is not None:
        check(torch.equal(loss, expected[0]), f"rank {rank}: inference loss differs")
        check(torch.equal(outputs, expected[1]), f"rank {rank}: inference outputs differ")
    else:
        check(loss is None and outputs is None, f"rank {rank}: inference gave a loss or outputs")


def check_dualpipe(rank, pp_size, ref):
    first, last = rank == 0, rank == pp_size - 1
    full_x, full_l, loss_ref, output_ref = ref["x"], ref["l"], ref["loss"], ref["outputs"]
    local_modules, ref_grads = local_copies(ref, [rank, pp_size - 1 - rank])
    # Declared as the reference requires (optional here: the DualPipeV check lets the shapes travel).
    dualpipe.set_p2p_tensor_shapes([(MICRO_BATCH_SIZE, SEQ_LEN, HIDDEN_SIZE)])
    dualpipe.set_p2p_tensor_dtype(torch.float32)
    model = dualpipe.DualPipe(local_modules, record_actions=True)
    x = full_x.chunk(2)[0] if first else full_x.chunk(2)[1] if last else None
    l = full_l.chunk(2)[1] if first else full_l.chunk(2)[0] if last else None
    # Rank 0 computes the losses of what entered at rank R-1, and the other way round.
    mine = 1 if first else 0

    loss, outputs = model.step(x, num_chunks=NUM_CHUNKS, criterion=criterion, labels=(l,), return_outputs=False)
    if first or last:
        check(torch.equal(loss, loss_ref.chunk(2)[mine]), f"rank {rank}: loss {loss} != {loss_ref.chunk(2)[mine]}")
    else:
        check(loss is None, f"rank {rank}: loss {loss}, expected None")
    check(outputs is None, f"rank {rank}: outputs given without return_outputs")

    # The two copies of each stage: their gradients summed, as the reference's example does.
    for p0, p1 in zip(local_modules[0].parameters(), local_modules[1].parameters()):
        # (The reference gathers into one tensor; Gloo's all_gather_into_tensor wants it flat, so into a list.)
        p0all = [torch.empty_like(p0) for _ in range(pp_size)]
        p1all = [torch.empty_like(p1) for _ in range(pp_size)]
        dist.all_gather(p0all, p0.grad)
        dist.all_gather(p1all, p1.grad)
        p0.grad += p1all[pp_size - 1 - rank]
        p1.grad += p0all[pp_size - 1 - rank]
    check_gradients(rank, local_modules, ref_grads)
    model.zero_grad()
    actions = model.last_step_actions()  # of the training step
    print(f"rank {rank}: messages over {model.transport}", flush=True)

    check_inference(rank, model, x, l, (loss_ref.chunk(2)[mine], output_ref.chunk(2)[mine]) if first or last else None)
    return actions


def check_dualpipev(rank, pp_size, ref):
    first = rank == 0
    x, l, loss_ref, output_ref = ref["x"], ref["l"], ref["loss"], ref["outputs"]
    local_modules, ref_grads = local_copies(ref, [rank, pp_size * 2 - 1 - rank])
    model = dualpipe.DualPipeV(local_modules, record_actions=True)
    if not first:
        x = l = None

    loss, outputs = model.step(x, num_chunks=NUM_CHUNKS, criterion=criterion, labels=(l,), return_outputs=False)
    if first:
        check(torch.equal(loss, loss_ref), f"rank {rank}: loss {loss} != {loss_ref}")
    else:
        check(loss is None, f"rank {rank}: loss {loss}, expected None")
    check(outputs is None, f"rank {rank}: outputs given without return_outputs")
    check_gradients(rank, local_modules, ref_grads)
    model.zero_grad()
    actions = model.last_step_actions()  # of the training step
    print(f"rank {rank}: messages over {model.transport}", flush=True)

    check_inference(rank, model, x, l, (loss_ref, output_ref) if first else None)
    check_forward_only_actions(rank, model.last_step_actions(), 2 * NUM_CHUNKS)
    model.record_actions = False  # after the pipeline was built: from the next step on
    check_inference(rank, model, x, l, (loss_ref, output_ref) if first else None)
    check(model.last_step_actions() == [], f"rank {rank}: actions recorded after record_actions = False")
    return actions


def check_forward_only_actions(rank, actions, forwards):
    """A step under no_grad records the actions it ran: forwards and their messages (an overlapped pair runs its
    forward half), none of the backwards, their messages or W that it skips."""
    kinds = [re.sub(r"^\d+|\d+$", "", name) if not name.startswith("(") else "F" for name, _, _ in actions]
    check(all(kind in ("F", "SEND_F", "RECV_F") for kind in kinds),
          f"rank {rank}: a forward-only step recorded {kinds}")
    check(kinds.count("F") == forwards, f"rank {rank}: {kinds.count('F')} forwards recorded, expected {forwards}")


def expect_error(what, call, kind, *words):
    try:
        call()
    except kind as e:
        message = str(e)
        missing = [w for w in words if w not in message]
        check(not missing, f"{what}: the message {message!r} does not name {missing}")
        print(f"{what}: {kind.__name__}: {message}")
        return
    raise AssertionError(f"{what}: no {kind.__name__} raised")


def check_errors(port):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=1, rank=0)
    try:
        stage = PipelineStage(8)
        expect_error("three modules", lambda: dualpipe.DualPipe((stage, stage, stage)), ValueError, "two", "got 3")
        expect_error("one module", lambda: dualpipe.DualPipeV((stage,)), ValueError, "two", "got 1")
        # Arguments of the wrong type: Python's own TypeError or AttributeError from inside named neither.
        for what, call, words in (
                ("modules=3", lambda: dualpipe.DualPipeV(3), ("modules=3 must be a list or tuple of two",)),
                ("rank_mapping=['0']", lambda: dualpipe.DualPipeV((stage, stage), rank_mapping=["0"]),
                 ("rank_mapping ['0'] must list each pipeline rank 0..0 once",)),
                ("rank_mapping=0", lambda: dualpipe.DualPipeV((stage, stage), rank_mapping=0), ("rank_mapping 0",)),
                ("batch_dim='0'", lambda: dualpipe.DualPipeV((stage, stage), batch_dim="0"),
                 ("batch_dim='0' must be an int",)),
                ("dp_group=1", lambda: dualpipe.DualPipeV((stage, stage), dp_group=1),
                 ("dp_group=1 must be a torch.distributed ProcessGroup or None",)),
                ("stall_report_dir=1", lambda: dualpipe.DualPipeV((stage, stage), stall_report_dir=1),
                 ("stall_report_dir=1 must be a directory's path or None",)),
                ("set_p2p_tensor_shapes(8)", lambda: dualpipe.set_p2p_tensor_shapes(8),
                 ("set_p2p_tensor_shapes: 8 must be a list of shapes",)),
                ("set_p2p_tensor_shapes([8])", lambda: dualpipe.set_p2p_tensor_shapes([8]),
                 ("set_p2p_tensor_shapes: 8 is not a shape",)),
                ("set_p2p_tensor_shapes([(2, '8')])", lambda: dualpipe.set_p2p_tensor_shapes([(2, "8")]),
                 ("set_p2p_tensor_shapes: (2, '8') is not a shape",))):
            expect_error(what, call, ValueError, *words)
        model = dualpipe.DualPipeV((PipelineStage(8), PipelineStage(8)))
        x = torch.randn(4, 2, 8)
        expect_error("num_chunks=1", lambda: model.step(x, num_chunks=1, criterion=criterion, labels=(x,)),
                     ValueError, "M >= 2R", "M=1")
        expect_error("num_chunks=0", lambda: model.step(x, num_chunks=0, criterion=criterion, labels=(x,)),
                     ValueError, "num_chunks=0")
        expect_error("DualPipe with one rank", lambda: dualpipe.DualPipe((stage, stage)).step(
            x, num_chunks=2, criterion=criterion, labels=(x,)), ValueError, "even number of ranks")
        expect_error("non-scalar criterion", lambda: model.step(
            x, num_chunks=2, criterion=lambda y, t: (y - t) ** 2, labels=(x,)), ValueError, "shape [2, 2, 8]",
            "one-element")
        expect_error("no criterion", lambda: model.step(x, num_chunks=2, labels=(x,)), ValueError, "criterion")
        # An NCCL group (none can be made without GPUs: the backend's name is what is checked, so it is faked) is
        # taken; modules it cannot carry are refused at the first step.
        real_get_backend = dualpipe.deepseek.dist.get_backend
        dualpipe.deepseek.dist.get_backend = lambda group=None: "nccl"
        try:
            on_nccl = dualpipe.DualPipeV((PipelineStage(8), PipelineStage(8)))
        finally:
            dualpipe.deepseek.dist.get_backend = real_get_backend
        expect_error("NCCL group, modules on the CPU", lambda: on_nccl.step(
            x, num_chunks=2, criterion=criterion, labels=(x,)), ValueError, "NCCL group", "CUDA device", "cpu")
        # A loss outside the autograd graph once crashed the process (SIGSEGV) in the backward.
        for what, loss_of in (("constant loss", lambda y, t: torch.tensor(1.0)),
                              ("detached loss", lambda y, t: ((y - t) ** 2).mean().detach()),
                              ("integer loss", lambda y, t: torch.tensor(3))):
            expect_error(what, lambda: model.step(x, num_chunks=2, criterion=loss_of, labels=(x,)), ValueError,
                         "loss of micro-batch 0 does not require grad")
        identity = dualpipe.DualPipeV((nn.Identity(), nn.Identity()))
        expect_error("identity modules", lambda: identity.step(x, num_chunks=2, criterion=criterion, labels=(x,)),
                     ValueError, "loss of micro-batch 0 does not require grad")
        expect_error("labels=None", lambda: model.step(x, num_chunks=2, criterion=criterion, labels=None), ValueError,
                     "labels")
        expect_error("batch_dim=5", lambda: dualpipe.DualPipeV((PipelineStage(8), PipelineStage(8)), batch_dim=5).step(
            x, num_chunks=2, criterion=criterion, labels=(x,)), ValueError, "batch_dim=5 is not a dimension",
            "(4, 2, 8)")
        for timeout in (float("nan"), float("inf"), 1e16, 0, -1, 1e-4):
            expect_error(f"timeout={timeout}", lambda: dualpipe.DualPipeV((stage, stage), timeout=timeout), ValueError,
                         f"timeout={timeout!r} must be a number of seconds from 0.001")
        for after in (0.5, -1, float("nan")):  # under a second a healthy step's wait would be reported
            expect_error(f"stall_report_after={after}",
                         lambda: dualpipe.DualPipeV((stage, stage), stall_report_after=after), ValueError,
                         f"stall_report_after={after!r} must be 0 (only on SIGUSR1) or a number of seconds from 1")
        expect_error("stall_report_after above half the timeout",
                     lambda: dualpipe.DualPipeV((stage, stage), timeout=10, stall_report_after=6), ValueError,
                     "stall_report_after=6 must be at most half of timeout=10")
        check(dualpipe.DualPipeV((stage, stage), timeout=1).stall_report_after == 0,
              "the default stall report is off where half the timeout is under a second")
        check(dualpipe.DualPipeV((stage, stage), timeout=6).stall_report_after == 3, "the default is cut to half")
        for flag in ("record_actions", "defer_weight_grads"):  # 'false' is a true string
            expect_error(f"{flag}='false'", lambda: dualpipe.DualPipeV((stage, stage), **{flag: "false"}), ValueError,
                         f"{flag}='false' must be True or False")
        for size in (1.5, 0, -1, True, "0"):
            expect_error(f"max_memory={size!r}", lambda: dualpipe.schedule("1f1b", 2, 4, max_memory=size), ValueError,
                         "max_memory")
        expect_error("a limit named as Python names it", lambda: dualpipe.schedule("1f1b", 64, 100000, max_memory=1000),
                     ValueError, "raise it with max_memory=")
        check_concurrent_step_refused(model, x)
        expect_error("pop without a flush", WeightGradStore.pop, RuntimeError, "no flushed batch")
        # A closure put while the store is not enabled (outside an I action) never runs: its gradient would be
        # missing from a step that succeeded.
        class PutsAlways(PipelineStage):
            def forward(self, x):
                WeightGradStore.put(lambda: None)
                return super().forward(x)
        careless = dualpipe.DualPipeV((PutsAlways(8), PipelineStage(8)))
        expect_error("a closure put outside an I action", lambda: careless.step(
            x, num_chunks=2, criterion=criterion, labels=(x,)), RuntimeError,
            "2 weight-gradient closures were put in WeightGradStore outside an I action")
        # A store without the reference's members is refused at the step, before any work, naming what it lacks.
        class Incomplete:
            enabled, cache = False, []

            @staticmethod
            def put(func):
                pass
        for store, lacks in ((Incomplete, "funcs_queue, flush, pop, clear"), (object(), "enabled, cache")):
            dualpipe.utils.WeightGradStore = store
            try:
                expect_error(f"WeightGradStore={store!r}", lambda: model.step(
                    x, num_chunks=2, criterion=criterion, labels=(x,)), ValueError, "dualpipe.utils.WeightGradStore=",
                    f"lacks {lacks}", "the reference's members")
            finally:
                dualpipe.utils.WeightGradStore = WeightGradStore
        # After the errors, a step still works.
        loss, _ = model.step(x, num_chunks=2, criterion=criterion, labels=(x,))
        check(loss.shape == (2,), f"loss of shape {tuple(loss.shape)} after the errors")
        print("a step after the errors: losses", [round(v, 4) for v in loss.tolist()])
    finally:
        dist.destroy_process_group()


def check_concurrent_step_refused(model, x):
    """A second step() while one runs (once a SIGSEGV in the pipeline) is refused; the first completes."""
    inside, release = threading.Event(), threading.Event()

    def waiting_criterion(y, t):
        inside.set()
        release.wait(30)
        return criterion(y, t)

    first = {}
    thread = threading.Thread(target=lambda: first.update(
        loss=model.step(x, num_chunks=2, criterion=waiting_criterion, labels=(x,))[0]))
    thread.start()
    check(inside.wait(30), "the first step never reached its criterion")
    try:
        expect_error("step() from a second thread", lambda: model.step(x, num_chunks=2, criterion=criterion,
                                                                       labels=(x,)),
                     RuntimeError, "already running in another thread")
    finally:
        release.set()
        thread.join(60)
    check("loss" in first and first["loss"].shape == (2,), "the first step did not complete")


def main():
    global SEQ_LEN, HIDDEN_SIZE
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("check", choices=["dualpipe", "dualpipev", "errors"])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="where every rank computes (cuda: the ranks share GPU 0, scripts/gpu_check.sh)")
    parser.add_argument("--backend", choices=["gloo", "nccl"], default="gloo",
                        help="the process group's (nccl: one rank per GPU, so --ranks 1 with one GPU)")
    parser.add_argument("--nccl-rules", action="store_true",
                        help="NCCL's rules on Gloo: directional channels, messages matched by order alone")
    parser.add_argument("--hidden", type=int, default=HIDDEN_SIZE, help="the stages' width (the reference's: 512)")
    parser.add_argument("--seq-len", type=int, default=SEQ_LEN, help="positions per sequence (the reference's: 256)")
    parser.add_argument("--reference-store", action="store_true",
                        help="defer through the program's own copy of the reference's WeightGradStore class")
    args = parser.parse_args()
    if args.reference_store:
        os.environ["DUALPIPE_EXAMPLE_REFERENCE_STORE"] = "1"  # read by the ranks
    if args.nccl_rules:
        os.environ["DUALPIPE_NCCL_RULES"] = "1"
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: this machine has no CUDA GPU")
    if args.backend == "nccl" and (args.device != "cuda" or args.ranks > torch.cuda.device_count()):
        parser.error(f"--backend nccl needs --device cuda and a GPU per rank ({args.ranks} ranks, "
                     f"{torch.cuda.device_count()} GPUs)")
    if args.check == "errors":
        check_errors(free_port())
    else:
        SEQ_LEN, HIDDEN_SIZE = args.seq_len, args.hidden
        torch.set_default_device(args.device)
        with tempfile.TemporaryDirectory() as tmp:
            reference_path = os.path.join(tmp, "whole_model.pt")
            whole_model_step(args.check, args.ranks, reference_path)
            start_ranks(run_rank, (args.ranks, args.check, free_port(), args.device, (args.seq_len, args.hidden),
                                   args.backend, reference_path), args.ranks)
    print(f"{args.check}: every check passed")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
