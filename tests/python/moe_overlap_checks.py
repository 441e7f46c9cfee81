"""dualpipe.overlap_moe on a DeepSeek-V3-style MoE model (real_models.py) at PP 2 x EP 2 (four Gloo ranks: the
experts of every MoE layer split between the two pipelines' ranks that hold the same stage, the tokens travelling to
them by all-to-all), under DualPipeV, with and without the overlap, in the same processes on copies of the same
stages:

    python moe_overlap_checks.py [--steps 2]
        losses and every gradient torch.equal between the two runs, and the overlapped pairs really interleaved
        (their chains gave the turn at all-to-alls)
    python moe_overlap_checks.py --emulate F_MS [--steps 6]
        the emulated device: each layer's attention and experts sleep F_MS/2 in the forward and twice that in the
        backward, as a GPU leaves the host idle, and every all-to-all of tokens takes at least F_MS/2 (a layer's
        dispatch and combine together F_MS: a2a = F, as in bench_emulated_device.py); prints
        each run's median step and its exposed all-to-all time (time spent waiting for exchanges), and their ratio

Prints one line per rank and a summary; exits 0 when every check passed. bench/bench_moe_overlap.py runs the second
form and records it."""
import argparse
import copy
import dataclasses
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

import dualpipe
import real_models
from rank_checks import check
from ranks import free_port, start_ranks

CHUNKS, SEQUENCES, SEQ_LEN = 8, 1, 16
CONFIG = real_models.Config(dim=64, n_layers=4, n_heads=4, n_kv_heads=4, vocab_size=128, moe=True, n_dense_layers=1,
                            n_experts=4, top_k=2, moe_hidden=32, route_scale=2.5)


class Exchanges:
    """The emulated links: an all-to-all of floating-point tokens completes no sooner than `seconds` after it was
    issued; the time a rank spends waiting for exchanges is summed in `exposed`."""

    def __init__(self, seconds):
        self.seconds, self.exposed = seconds, 0.0
        self.original = dist.all_to_all_single

    def install(self):
        dist.all_to_all_single = self.all_to_all_single

    def all_to_all_single(self, output, input, output_split_sizes=None, input_split_sizes=None, group=None,
                          async_op=False):
        work = _Delayed(self, self.original(output, input, output_split_sizes, input_split_sizes, group=group,
                                            async_op=True),
                        time.perf_counter() + (self.seconds if input.is_floating_point() else 0.0))
        if async_op:
            return work
        work.wait()
        return None


class _Delayed:
    def __init__(self, exchanges, work, ready_at):
        self.exchanges, self.work, self.ready_at = exchanges, work, ready_at

    def wait(self):
        start = time.perf_counter()
        time.sleep(max(0.0, self.ready_at - start))
        self.work.wait()
        self.exchanges.exposed += time.perf_counter() - start
        return True


class DeviceTime(torch.autograd.Function):
    """Identity that takes `seconds` in the forward and twice that in the backward (sleeping: the host stays idle)."""

    @staticmethod
    def forward(ctx, x, seconds):
        ctx.seconds = seconds
        time.sleep(seconds)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        time.sleep(2 * ctx.seconds)
        return grad, None


def emulate_device(stage, seconds):
    for layer in stage.layers.values():
        parts = [layer.attention] + ([layer.moe.experts] if layer.moe_enabled else [layer.feed_forward])
        for part in parts:
            part.register_forward_hook(lambda _m, _i, out, s=seconds: DeviceTime.apply(out, s))


def build(rank, world, chunks, config, emulate_ms):
    from torch.distributed.device_mesh import init_device_mesh
    ep, pp = 2, world // 2
    mesh = init_device_mesh("cpu", (ep, pp), mesh_dim_names=("ep", "pp"))
    replica, p = divmod(rank, pp)
    torch.manual_seed(0)
    stages = real_models.split(real_models.Transformer(config), 2 * pp)
    copies = {}
    for name in ("off", "on"):
        copies[name] = [copy.deepcopy(stages[s]) for s in (p, 2 * pp - 1 - p)]
        for stage in copies[name]:
            real_models.shard_experts(stage, mesh["ep"].get_group())
            if emulate_ms:
                emulate_device(stage, emulate_ms / 2e3)
    x, y = real_models.tokens(config, ep * chunks * SEQUENCES, SEQ_LEN)
    rows = slice(replica * chunks * SEQUENCES, (replica + 1) * chunks * SEQUENCES)
    return copies, mesh["pp"].get_group(), p, x[rows], y[rows]


def run_rank(rank, world, port, steps, chunks, config, emulate_ms, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=world, rank=rank)
    try:
        exchanges = Exchanges(emulate_ms / 2e3)  # a dispatch and a combine per layer: a2a = F
        exchanges.install()  # before overlap_moe, which issues through what it finds
        copies, group, p, x, y = build(rank, world, chunks, config, emulate_ms)
        pipes = {"off": dualpipe.DualPipeV(copies["off"], process_group=group)}  # built before the class has the hook
        dualpipe.overlap_moe(*copies["on"])
        pipes["on"] = dualpipe.DualPipeV(copies["on"], process_group=group)
        turns = count_turns()
        results = {}
        for name in ("off", "on"):
            losses, times = [], []
            exchanges.exposed = 0.0
            for _ in range(steps):
                for s in copies[name]:
                    s.zero_grad(set_to_none=True)
                dist.barrier()
                start = time.perf_counter()
                loss, _ = pipes[name].step(*((x,) if p == 0 else ()), num_chunks=chunks,
                                           criterion=real_models.cross_entropy, labels=(y,) if p == 0 else ())
                times.append(time.perf_counter() - start)
                losses.append(loss)
            grads = [q.grad for s in copies[name] for q in s.parameters()]
            results[name] = dict(losses=losses, grads=grads, step=statistics.median(times[1:] or times),
                                 exposed=exchanges.exposed / steps)
        if p == 0:
            for a, b in zip(results["off"]["losses"], results["on"]["losses"]):
                check(torch.equal(a, b), f"rank {rank}: losses {b} with the overlap, {a} without")
        for a, b in zip(results["off"]["grads"], results["on"]["grads"]):
            check(torch.equal(a, b), f"rank {rank}: a gradient differs with the overlap")
        check(turns[0] > 0, f"rank {rank}: the overlapped pairs never gave the turn at an all-to-all")
        off, on = results["off"], results["on"]
        print(f"rank {rank}: overlap bit-identical to no overlap over {steps} steps ({turns[0]} turns given at "
              f"all-to-alls); step {on['step'] * 1e3:.1f} ms vs {off['step'] * 1e3:.1f} ms, exposed all-to-all "
              f"{on['exposed'] * 1e3:.1f} ms vs {off['exposed'] * 1e3:.1f} ms", flush=True)
        gathered = [None] * world
        dist.all_gather_object(gathered, {k: (v["step"], v["exposed"]) for k, v in results.items()})
        if rank == 0 and out:
            torch.save(gathered, out)
    finally:
        dist.destroy_process_group()


def count_turns():
    """How often a chain of an overlapped pair gave the turn at an all-to-all."""
    from dualpipe import moe_overlap
    turns = [0]
    pause = moe_overlap._Chain.pause

    def counted(chain):
        turns[0] += 1
        pause(chain)
    moe_overlap._Chain.pause = counted
    return turns


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--microbatches", type=int, default=CHUNKS, help="per step (DualPipeV: at least 4)")
    parser.add_argument("--layers", type=int, default=CONFIG.n_layers,
                        help="of the model (a multiple of 4: two per stage at 8); the first is dense")
    parser.add_argument("--emulate", type=float, default=0.0, metavar="F_MS",
                        help="emulated device: compute and all-to-all times, in ms (0: the CPU's own)")
    parser.add_argument("--out", help="where rank 0 saves every rank's (step, exposed) per run")
    args = parser.parse_args()
    if args.layers < 4 or args.layers % 4:
        parser.error(f"--layers {args.layers}: give a multiple of 4 (four stages)")
    config = dataclasses.replace(CONFIG, n_layers=args.layers)
    start_ranks(run_rank, (4, free_port(), args.steps, args.microbatches, config, args.emulate, args.out), 4)
    print("moe overlap: every check passed")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
