"""DeepSeek's reference DualPipe on the stages of bench_runtime_overhead, for its side-by-side reference.

The stage is the reference's own example stage (examples/example_dualpipe.py's PipelineStage: Linear(h, 4h),
GELU, Linear(4h, h), imported from the checkout, never copied), at hidden 8 with micro-batches of 1 x 2 x 8, so
compute is negligible, as in our bench. R processes over Gloo, one intra-op thread each; rank r holds stages r and
R-1-r, half the batch enters at each end. Each step is timed on rank 0 from a barrier to the barrier after the step,
as bench_runtime_overhead times ours. Prints one JSON line: {"median_ms", "min_ms", "max_ms", "steps"}.

    python bench/reference_overhead.py --reference CHECKOUT --ranks 4 --microbatches 20 --steps 50 --warmup 10
"""
import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from bench_python_pipelines import free_port, put_reference_on_cpu

HIDDEN, SEQUENCE, MICROBATCH = 8, 2, 1


def reference_stage_class(checkout):
    spec = importlib.util.spec_from_file_location("reference_example",
                                                  os.path.join(checkout, "examples", "example_dualpipe.py"))
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example.PipelineStage, example.criterion


def run_rank(rank, ranks, microbatches, steps, warmup, port, checkout, out):
    torch.set_num_threads(1)
    sys.path.insert(0, checkout)
    import dualpipe
    put_reference_on_cpu()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=ranks, rank=rank)
    stage, criterion = reference_stage_class(checkout)
    torch.manual_seed(0)
    modules = torch.nn.Sequential(stage(HIDDEN), stage(HIDDEN))
    dualpipe.set_p2p_tensor_shapes([(MICROBATCH, SEQUENCE, HIDDEN)])
    dualpipe.set_p2p_tensor_dtype(torch.float32)
    model = dualpipe.DualPipe(modules)
    shape = (microbatches * MICROBATCH // 2, SEQUENCE, HIDDEN)
    x, labels = torch.randn(*shape), torch.randn(*shape)
    if rank not in (0, ranks - 1):
        x = labels = None
    times = []
    for i in range(warmup + steps):
        dist.barrier()
        start = time.perf_counter()
        model.step(x, num_chunks=microbatches, criterion=criterion, labels=(labels,), return_outputs=False)
        dist.barrier()
        if i >= warmup:
            times.append((time.perf_counter() - start) * 1e3)
        modules.zero_grad(set_to_none=True)
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times),
                       "steps": steps}, f)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference", required=True, help="a checkout of deepseek-ai/DualPipe (holding dualpipe/)")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=20)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    example = os.path.join(args.reference, "examples", "example_dualpipe.py")
    if not os.path.isfile(os.path.join(args.reference, "dualpipe", "dualpipe.py")) or not os.path.isfile(example):
        parser.error(f"--reference {args.reference}: no dualpipe/dualpipe.py and examples/example_dualpipe.py there "
                     "(give the root of a deepseek-ai/DualPipe checkout)")
    if args.ranks < 2 or args.ranks % 2 or args.microbatches < 2 * args.ranks or args.microbatches % 2:
        parser.error(f"--ranks {args.ranks} --microbatches {args.microbatches}: DualPipe needs an even number of "
                     "ranks >= 2 and an even number of micro-batches >= 2 x ranks")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        mp.spawn(run_rank, args=(args.ranks, args.microbatches, args.steps, args.warmup, free_port(),
                                 os.path.abspath(args.reference), out), nprocs=args.ranks, join=True)
        with open(out) as f:
            print(f.read())


if __name__ == "__main__":
    main()
