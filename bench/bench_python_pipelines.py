"""DualPipeV from Python, side by side in one run: dualpipe.DualPipeV (our C++ executor), DeepSeek's reference
DualPipeV (with --reference PATH, a checkout of deepseek-ai/DualPipe; its code is imported from there, never
copied), and torch.distributed.pipelining's ScheduleDualPipeV. The same GPT-style blocks (pre-norm attention and
MLP, one per stage, 2R stages on R Gloo processes), the same weights and data, the same micro-batches.

Three cases:
  host overhead   stages that compute next to nothing (x * w, width 8): the step time is the runtime's own cost;
  compute         GPT blocks of width 128, 64 positions, 4 sequences per micro-batch: step time and tokens/s at
                  equal compute;
  costly W        stages whose weight gradient is costly: a custom autograd Function that sleeps 2 ms in its forward,
                  2 ms for its input gradient and 4 ms for its weight gradient, which it puts aside in the running
                  package's WeightGradStore (the reference's protocol) while that is enabled: ours and the reference
                  defer it to W; PyTorch's runtime never enables it, so there it runs with the input gradient.
Prints each runtime's median step time over --steps steps (after one warm-up) with its range, tokens/s, the first
step's losses' largest difference to ours, and the ratio of our step to the fastest peer's.

    python bench/bench_python_pipelines.py [--reference ~/DualPipe] [--kind dualpipev|dualpipe] [--ranks 4]
                                           [--microbatches 8] [--steps 7]

--kind dualpipe runs DualPipe (two directions, R stages with two copies each) for ours and the reference.
"""
import argparse
import os
import socket
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

CASES = {"host overhead": dict(block="scale", width=8, heads=0, positions=4, sequences=1),
         "compute": dict(block="gpt", width=128, heads=4, positions=64, sequences=4),
         "costly W": dict(block="sleep", width=8, heads=0, positions=4, sequences=1)}
SLEEP_F, SLEEP_I, SLEEP_W = 0.002, 0.002, 0.004  # seconds, the "costly W" stage's forward, input and weight parts


class Scale(nn.Module):
    """A stage that computes next to nothing (one multiply, one parameter): its step time is the runtime's own."""

    def __init__(self, width, heads):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x):
        return x * self.weight


class SleepFunc(torch.autograd.Function):
    """x * w that takes `sleeps` = (forward, input gradient, weight gradient) seconds, sleeping (so that 4 processes
    on 2 cores time the schedule, not the cores). The weight part is put aside in WeightGradStore while that is
    enabled, as the reference's LinearFunc does."""

    @staticmethod
    def forward(ctx, x, weight, sleeps):
        ctx.save_for_backward(x, weight)
        ctx.sleeps = sleeps
        time.sleep(sleeps[0])
        return x * weight

    @staticmethod
    def backward(ctx, grad):
        from dualpipe.utils import WeightGradStore  # the running package's: ours, or the reference's
        x, weight = ctx.saved_tensors
        if weight.grad is None:
            weight.grad = torch.zeros_like(weight)

        def grad_weight():
            time.sleep(ctx.sleeps[2])
            weight.grad += (grad * x).flatten(0, -2).sum(0)

        if WeightGradStore.enabled:
            WeightGradStore.put(grad_weight)
        else:
            grad_weight()
        time.sleep(ctx.sleeps[1])
        return grad * weight, None, None


class Sleep(Scale):
    def __init__(self, width, heads, sleeps=(SLEEP_F, SLEEP_I, SLEEP_W)):
        super().__init__(width, heads)
        self.sleeps = tuple(sleeps)

    def forward(self, x):
        return SleepFunc.apply(x, self.weight, self.sleeps)


class Block(nn.Module):
    """A GPT block: pre-norm causal self-attention and a 4x MLP, each with a residual."""

    def __init__(self, width, heads):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attention = nn.MultiheadAttention(width, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        h = self.norm1(x)
        mask = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1)
        x = x + self.attention(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


def criterion(output, target):
    return F.mse_loss(output, target).clone()


def make_case(case, ranks, microbatches):
    torch.manual_seed(0)
    kind = {"gpt": Block, "scale": Scale, "sleep": Sleep}[case["block"]]
    blocks = [kind(case["width"], case["heads"]) for _ in range(2 * ranks)]
    shape = (microbatches * case["sequences"], case["positions"], case["width"])
    return blocks, torch.randn(*shape), torch.randn(*shape)


def put_reference_on_cpu():
    """The reference (imported as dualpipe) allocates its receive buffers on CUDA and checks that the modules are
    there: both on the CPU instead."""
    import dualpipe.comm as comm
    comm.build_from_tensor_shapes = lambda: [torch.empty(s, dtype=comm.TENSOR_DTYPE, requires_grad=True)
                                             for s in comm.TENSOR_SHAPES]
    torch.cuda.current_device = lambda: "cpu"


def our_step(kind, blocks, rank, ranks, microbatches, x, l, reference=False):
    import dualpipe
    if reference:
        put_reference_on_cpu()
    # Both declare the shapes (the reference must; ours then posts its receives ahead, as the reference does).
    dualpipe.set_p2p_tensor_shapes([(x.shape[0] // microbatches, *x.shape[1:])])
    dualpipe.set_p2p_tensor_dtype(torch.float32)
    if kind == "dualpipev":
        model = dualpipe.DualPipeV((blocks[rank], blocks[2 * ranks - 1 - rank]))
        x, l = (x, l) if rank == 0 else (None, None)
    else:  # half the batch enters at each end; the labels are those of what enters at the other end
        model = dualpipe.DualPipe((blocks[rank], blocks[ranks - 1 - rank]))
        end = {0: 0, ranks - 1: 1}.get(rank)
        x, l = (x.chunk(2)[end], l.chunk(2)[1 - end]) if end is not None else (None, None)

    def step():
        loss, _ = model.step(x, num_chunks=microbatches, criterion=criterion, labels=(l,))
        return loss
    return step


def torch_step(blocks, rank, ranks, microbatches, x, l):
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import ScheduleDualPipeV
    example = torch.zeros(x.shape[0] // microbatches, *x.shape[1:])
    stages = [PipelineStage(blocks[s], s, 2 * ranks, torch.device("cpu"), input_args=(example,), output_args=example)
              for s in (rank, 2 * ranks - 1 - rank)]
    # PyTorch opens every stage's links with a batched send and receive to each neighbour stage, the last rank's
    # two middle stages included, and Gloo has no link from a process to itself: those empty opening messages
    # are left out (as in tests/python/pytorch_runtime.py).
    for stage in stages:
        opening = stage._get_init_p2p_neighbors_ops
        stage._get_init_p2p_neighbors_ops = lambda opening=opening: [op for op in opening() if op.peer != rank]
    schedule = ScheduleDualPipeV(stages, microbatches, loss_fn=criterion, scale_grads=False)

    def step():
        losses = []
        if rank == 0:
            schedule.step(x, target=l, losses=losses)
        else:
            schedule.step()
        return torch.stack(losses) if losses else None
    return step


def run_rank(rank, ranks, kind, runtime, case_name, microbatches, steps, port, reference, out):
    torch.set_num_threads(1)
    if runtime == "reference":
        sys.path.insert(0, reference)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=ranks, rank=rank)
    blocks, x, l = make_case(CASES[case_name], ranks, microbatches)
    if runtime == "torch":
        step = torch_step(blocks, rank, ranks, microbatches, x, l)
    else:
        step = our_step(kind, blocks, rank, ranks, microbatches, x, l, reference=runtime == "reference")
    times, first_loss = [], None
    for i in range(steps + 1):
        dist.barrier()
        start = time.perf_counter()
        loss = step()
        dist.barrier()
        if i == 0:
            first_loss = loss
        else:
            times.append(time.perf_counter() - start)
        for b in blocks:
            b.zero_grad(set_to_none=True)
    if rank == 0:
        torch.save({"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times),
                    "loss": first_loss}, out)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(runtime, case_name, args):
    """The runtime's result, or None when it failed (its error's last line is printed)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.pt")
        try:
            mp.spawn(run_rank, args=(args.ranks, args.kind, runtime, case_name, args.microbatches, args.steps,
                                     free_port(), args.reference, out), nprocs=args.ranks, join=True)
        except mp.ProcessRaisedException as error:
            print(f"  ({runtime} failed on {case_name}: {str(error).strip().splitlines()[-1][:200]})")
            return None
        return torch.load(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference", help="a checkout of deepseek-ai/DualPipe (the folder holding dualpipe/)")
    parser.add_argument("--kind", choices=["dualpipev", "dualpipe"], default="dualpipev",
                        help="dualpipe: DualPipe's two directions, ours and the reference only (PyTorch has none)")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=8, help="at least 2 x ranks (DualPipeV's rule)")
    parser.add_argument("--steps", type=int, default=7, help="timed steps, after one warm-up step")
    args = parser.parse_args()
    if args.reference and not os.path.isfile(os.path.join(args.reference, "dualpipe", "dualpipev.py")):
        parser.error(f"--reference {args.reference}: no dualpipe/dualpipev.py there (give the checkout's root)")
    runtimes = ["ours"] + (["reference"] if args.reference else []) + (["torch"] if args.kind == "dualpipev" else [])
    title = {"dualpipev": "DualPipeV", "dualpipe": "DualPipe"}[args.kind]
    names = {"ours": f"dualpipe.{title}", "reference": f"reference {title}", "torch": "torch ScheduleDualPipeV"}
    stages = 2 * args.ranks if args.kind == "dualpipev" else args.ranks
    print(f"{title}, {args.ranks} Gloo processes, {stages} stages, {args.microbatches} micro-batches, "
          f"median of {args.steps} steps; losses of rank 0")
    for case_name, case in CASES.items():
        tokens = args.microbatches * case["sequences"] * case["positions"]
        results = {r: measure(r, case_name, args) for r in runtimes}
        results = {r: result for r, result in results.items() if result is not None}
        print(f"\n{case_name} ({case['block']} stages of width {case['width']}, {case['positions']} positions, "
              f"{case['sequences']} sequences per micro-batch):")
        print(f"  {'runtime':<26}{'step ms':>10}{'range ms':>18}{'tokens/s':>12}{'loss diff to ours':>20}")
        for r in results:
            t = results[r]["median_s"]
            spread = f"{results[r]['min_s'] * 1e3:.2f}-{results[r]['max_s'] * 1e3:.2f}"
            diff = (results[r]["loss"].double() - results["ours"]["loss"].double()).abs().max().item()
            print(f"  {names[r]:<26}{t * 1e3:>10.2f}{spread:>18}{tokens / t:>12.0f}{diff:>20.3g}")
        peers = [results[r]["median_s"] for r in results if r != "ours"]
        if peers:
            print(f"  ours / fastest peer: {results['ours']['median_s'] / min(peers):.2f}")


if __name__ == "__main__":
    main()
