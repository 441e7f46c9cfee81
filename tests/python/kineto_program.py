"""A program traced with torch.profiler for the tests of `dualpipe profile --kineto`: a small transformer's
forward, backward and weight regions, two ranks' gloo all-reduce run beside compute ("overlapped") and before it
("sequential"), and DeepSeek-style phases: an all-to-all issued inside "dispatch" on a second thread while the main
thread computes inside "mlp", part of it inside a nested "experts". Each rank also times every region, every
matrix product of the phases and every all-to-all itself with time.perf_counter, the reference the tests use.
Every thread is profiled (profile_all_threads), so that gloo's worker thread, which runs the collectives, is in
the trace.

    python kineto_program.py OUT_DIR     # writes trace_rank{0,1}.json, measured_rank{0,1}.json, phases_rank{0,1}.json
"""
import gc
import json
import os
import sys
import threading
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.profiler import ProfilerActivity, profile, record_function


def timed(name, measured, body):
    # The program's clock runs inside the region, so the profiler's span of it can only be longer, by the time
    # the region takes to open and close.
    with record_function(name):
        start = time.perf_counter()
        result = body()
        elapsed = time.perf_counter() - start
    measured.setdefault(name, []).append(elapsed * 1e6)
    return result


def compute_for(x, repeats):
    for _ in range(repeats):
        x = torch.tanh(x @ x)
    return x


def phases(rank, step, own):
    """One step of the phases. The ranks take turns to enter the all-to-all late (250 ms), so that the other's waits
    in it while its main thread computes: long against the milliseconds a busy machine may take to start Gloo's
    worker thread and to wake the caller after it, which the program's clock counts and Gloo's run does not (at
    80 ms they made 7% under a full test run). `own` collects the program's clock: each all-to-all's [start, end]
    and each product's, by region."""
    send = torch.ones(2, 1 << 16)
    # Products of about 20 ms: the microseconds between the program's clock and the operator (more when a busy
    # machine preempts the thread there: 5% of 2.7 ms products under a full test run beside a build) stay under 1%.
    square = torch.randn(768, 768) / 28

    def dispatch():
        with record_function("dispatch"):
            if step % 2 == rank:
                time.sleep(0.25)
            received = torch.empty_like(send)
            start = time.perf_counter()
            dist.all_to_all_single(received, send)
            own["dispatch"].append((start, time.perf_counter()))

    result = torch.empty_like(square)

    def product(region):
        # One operator between the clock's readings (aten::mm into a buffer, nothing allocated): the program's span
        # is the operator's, but for the call's own few microseconds.
        start = time.perf_counter()
        torch.mm(square, square, out=result)
        own[region].append((start, time.perf_counter()))

    exchange = threading.Thread(target=dispatch)
    with record_function("mlp"):
        exchange.start()
        # Gloo's worker thread starts the all-to-all before the products take the core: on two busy cores it
        # could start milliseconds after the call, while the program's clock counts it in flight from the call.
        time.sleep(0.01)
        for _ in range(5):
            product("mlp")
        with record_function("experts"):
            for _ in range(5):
                product("experts")
    exchange.join()


def rank_main(rank, out_dir, port):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 256, batch_first=True)
    tokens = torch.randn(4, 32, 64)
    payload = torch.ones(4 << 20)
    square = torch.randn(256, 256) / 16
    measured = {}
    # Python's cycle collector, run at an allocation it happens to count, would land between the program's clock
    # and a region's edge: it runs between iterations instead.
    gc.disable()
    own = {"dispatch": [], "mlp": [], "experts": []}
    all_threads = torch._C._profiler._ExperimentalConfig(profile_all_threads=True)
    with profile(activities=[ProfilerActivity.CPU], experimental_config=all_threads) as prof:
        for _ in range(8):
            loss = timed("forward", measured, lambda: layer(tokens).sum())
            # Input gradients first, then the weights' (the split backward's B and W).
            inputs = [p for n, p in layer.named_parameters() if "bias" in n]
            weights = [p for n, p in layer.named_parameters() if "bias" not in n]
            timed("backward", measured, lambda: torch.autograd.grad(loss, inputs, retain_graph=True))
            timed("weight", measured, lambda: torch.autograd.grad(loss, weights))

            def overlapped():
                work = dist.all_reduce(payload, async_op=True)
                compute_for(square, 60)
                work.wait()

            def sequential():
                dist.all_reduce(payload)
                compute_for(square, 60)

            dist.barrier()
            timed("overlapped", measured, overlapped)
            dist.barrier()
            timed("sequential", measured, sequential)
            gc.collect()
        for step in range(6):
            dist.barrier()
            phases(rank, step, own)
            gc.collect()
    prof.export_chrome_trace(os.path.join(out_dir, f"trace_rank{rank}.json"))
    with open(os.path.join(out_dir, f"measured_rank{rank}.json"), "w") as f:
        json.dump(measured, f)
    with open(os.path.join(out_dir, f"phases_rank{rank}.json"), "w") as f:
        json.dump(own, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    out = sys.argv[1]
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 29617
    mp.spawn(rank_main, args=(out, port), nprocs=2, join=True)
