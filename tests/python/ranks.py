"""How the test programs start their ranks: from a fork server that has imported PyTorch once, so that a rank starts
in milliseconds instead of importing torch again (3 to 4 s of CPU each on the 2-core test machine: most of a small
check's time). Each rank still starts from a process that has run nothing (no thread pool, no CUDA context), which a
plain fork of the launching program, which has, would not give. Users start theirs with torch.multiprocessing.spawn
or torchrun, as examples/ does; the ranks' code is the same under every start method."""
import multiprocessing
import socket

import torch.multiprocessing as mp


def start_ranks(fn, args, nprocs):
    """fn(rank, *args) on nprocs processes; returns when all have, raising the first rank's failure."""
    multiprocessing.set_forkserver_preload(["torch", "dualpipe"])  # a module that is not installed is skipped
    mp.start_processes(fn, args=args, nprocs=nprocs, join=True, start_method="forkserver")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
