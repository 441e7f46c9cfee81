"""A user's dualpipe.DualPipeV run under torch.profiler, as docs/profile.md shows: 2 ranks over Gloo, 4 stages of
Linear(64, 64) and Tanh, 4 micro-batches, 2 steps marked with prof.step(). The executor names each action's region
("forward stage 3"), so the traces feed `dualpipe plan --from-kineto` without a line of profiling code of ours.

    python profiled_dualpipev.py OUT_DIR      # writes OUT_DIR/rank0.json and rank1.json
"""
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile

from ranks import free_port, start_ranks


def rank_main(rank, world, port, out):
    import dualpipe

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    stages = [nn.Sequential(nn.Linear(64, 64), nn.Tanh()) for _ in range(2 * world)]
    pipe = dualpipe.DualPipeV((stages[rank], stages[2 * world - 1 - rank]))
    inputs, labels = (torch.randn(8, 64), (torch.randn(8, 64),)) if rank == 0 else (None, ())
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(2):
            pipe.step(inputs, num_chunks=4, criterion=lambda o, t: ((o - t) ** 2).mean(), labels=labels)
            prof.step()
    prof.export_chrome_trace(f"{out}/rank{rank}.json")
    dist.destroy_process_group()


if __name__ == "__main__":
    start_ranks(rank_main, (2, free_port(), sys.argv[1]), nprocs=2)
