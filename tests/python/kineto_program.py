"""A program traced with torch.profiler for the tests of `dualpipe profile --kineto`: a small transformer's
forward, backward and weight regions, and two ranks' gloo all-reduce run beside compute ("overlapped") and before
it ("sequential"). Each rank also times every region itself with time.perf_counter, the reference the tests use.

    python kineto_program.py OUT_DIR     # writes trace_rank{0,1}.json and measured_rank{0,1}.json
"""
import gc
import json
import os
import sys
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
    with profile(activities=[ProfilerActivity.CPU]) as prof:
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
    prof.export_chrome_trace(os.path.join(out_dir, f"trace_rank{rank}.json"))
    with open(os.path.join(out_dir, f"measured_rank{rank}.json"), "w") as f:
        json.dump(measured, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    out = sys.argv[1]
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 29617
    mp.spawn(rank_main, args=(out, port), nprocs=2, join=True)
