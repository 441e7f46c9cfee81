"""Train a Python model with a dualpipe schedule run by PyTorch's own pipelining runtime.

dualpipe plans the schedule (here the planner's best within a memory limit, or any kind you name), and
torch.distributed.pipelining's `_PipelineScheduleRuntime` runs it on your `nn.Module`s, one process per rank. The
model is a small byte-level transformer language model, cut into one block per stage; the text is the `fortunes`
corpus of Debian's `fortunes` package (or any file you give). Step 1's loss is checked against one process
running the whole model on the same batch.

    scripts/setup.sh                                   # PyTorch and the dualpipe package
    $DUALPIPE_PYTHON examples/python/train_with_pytorch_runtime.py --ranks 4 --steps 30

docs/python.md shows its output. CPU and Gloo here; on GPUs give --device cuda --backend nccl.
"""
import argparse
import math
import os
import pathlib
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

import dualpipe
import dualpipe.pytorch

VOCAB = 256  # bytes


class Block(torch.nn.Module):
    """One stage: a transformer block, with the embedding on the first stage and the head on the last."""

    def __init__(self, index, num_stages, width, heads, context):
        super().__init__()
        self.first, self.last = index == 0, index == num_stages - 1
        if self.first:
            self.embed = torch.nn.Embedding(VOCAB, width)
            self.position = torch.nn.Parameter(torch.randn(context, width) * 0.02)
        self.block = torch.nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, batch_first=True,
                                                      norm_first=True)
        self.register_buffer("causal", torch.nn.Transformer.generate_square_subsequent_mask(context),
                             persistent=False)
        if self.last:
            self.norm = torch.nn.LayerNorm(width)
            self.head = torch.nn.Linear(width, VOCAB)

    def forward(self, x):
        if self.first:
            x = self.embed(x) + self.position[: x.shape[1]]
        x = self.block(x, src_mask=self.causal[: x.shape[1], : x.shape[1]], is_causal=True)
        return self.head(self.norm(x)) if self.last else x


def make_stages(num_stages, args):
    torch.manual_seed(args.seed)  # every process builds the same model and keeps its own stages
    return [Block(s, num_stages, args.width, args.heads, args.context) for s in range(num_stages)]


def loss_fn(logits, target):
    return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), target.reshape(-1))


def read_corpus(path):
    if path:
        return pathlib.Path(path).read_bytes()
    folder = pathlib.Path("/usr/share/games/fortunes")
    files = sorted(p for p in folder.glob("*") if p.is_file() and p.suffix not in (".dat", ".u8"))
    if not files:
        sys.exit(f"no corpus in {folder}: apt-get install fortunes, or give --corpus FILE")
    return b"".join(p.read_bytes() for p in files)


def batch(text, step, rows, context):
    """The step's sequences: inputs and next-byte targets, the same in every process."""
    generator = torch.Generator().manual_seed(step)
    starts = torch.randint(0, len(text) - context - 1, (rows,), generator=generator).tolist()
    data = torch.tensor([list(text[s:s + context + 1]) for s in starts], dtype=torch.long)
    return data[:, :-1].contiguous(), data[:, 1:].contiguous()


def pick_schedule(args):
    if args.kind == "plan":
        costs = dualpipe.Costs(F=1, B=2, W=1)
        return dualpipe.plan(args.ranks, args.microbatches, costs, memory_limit=args.memory_limit,
                             placements=["linear", "v"]).schedule
    return dualpipe.schedule(args.kind, args.ranks, args.microbatches)


def run_rank(rank, args, port, text):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    device = torch.device(args.device if args.device == "cpu" else f"cuda:{rank}")
    dist.init_process_group(args.backend, rank=rank, world_size=args.ranks)
    schedule = pick_schedule(args)
    owner = schedule.placement.rank_of_stage[0]
    stages = make_stages(schedule.stages, args)
    mine = [s for s in range(schedule.stages) if owner[s] == rank]
    rows = args.microbatches * args.sequences
    example = torch.zeros(args.sequences, args.context, args.width, device=device)
    tokens = torch.zeros(args.sequences, args.context, dtype=torch.long, device=device)
    pipeline_stages = []
    for s in mine:
        module = stages[s].to(device)
        inputs = (tokens,) if s == 0 else (example,)
        outputs = torch.zeros(args.sequences, args.context, VOCAB, device=device) if s == schedule.stages - 1 \
            else example
        stage = PipelineStage(module, s, schedule.stages, device, input_args=inputs, output_args=outputs)
        if args.backend == "gloo":
            # In a V the two middle stages share the last rank; PyTorch opens every link with an empty message,
            # and Gloo cannot send a process to itself (NCCL can). The runtime hands a local stage's output over
            # without a message, so those opening messages are left out.
            opening = stage._get_init_p2p_neighbors_ops
            stage._get_init_p2p_neighbors_ops = lambda opening=opening: [op for op in opening() if op.peer != rank]
        pipeline_stages.append(stage)
    runtime = _PipelineScheduleRuntime(pipeline_stages, args.microbatches, loss_fn=loss_fn, scale_grads=True)
    dualpipe.pytorch.load(runtime, schedule)
    parameters = [p for s in mine for p in stages[s].parameters()]
    optimizer = torch.optim.AdamW(parameters, lr=args.lr)
    has_first, has_last = 0 in mine, schedule.stages - 1 in mine
    if rank == 0:
        print(f"{schedule.kind} on {args.ranks} ranks, {schedule.stages} stages (rank 0 holds {mine}), "
              f"{args.microbatches} micro-batches of {args.sequences} x {args.context} bytes; "
              f"{sum(p.numel() for s in stages for p in s.parameters())} parameters", flush=True)
    for step in range(1, args.steps + 1):
        x, y = batch(text, step, rows, args.context)
        started = time.perf_counter()
        optimizer.zero_grad()
        losses = []
        runtime.step(*([x.to(device)] if has_first else []), target=y.to(device) if has_last else None,
                     losses=losses)
        optimizer.step()
        elapsed = time.perf_counter() - started
        if has_last:
            loss = torch.stack(losses).mean().item()
            line = f"step {step:3d}  loss {loss:.4f}  {1000 * elapsed:7.1f} ms"
            if step == 1:
                line += "  " + check_against_one_process(args, schedule.stages, x, y, loss)
            print(f"[rank {rank}] {line}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


def check_against_one_process(args, num_stages, x, y, pipeline_loss):
    """The loss of the same batch through the whole model in one process (fresh weights, as before step 1)."""
    with torch.no_grad():
        h = x
        for stage in make_stages(num_stages, args):
            h = stage(h)
        # the runtime's loss is the mean over micro-batches of each one's mean, which is the batch's mean
        reference = loss_fn(h, y).item()
    difference = abs(pipeline_loss - reference) / reference
    verdict = "matches" if difference < 1e-5 else "DIFFERS FROM"
    return f"({verdict} one process: {reference:.6f}, relative difference {difference:.1e})"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=4, help="pipeline ranks, one process each [4]")
    parser.add_argument("--microbatches", type=int, default=8, help="micro-batches per step [8]")
    parser.add_argument("--kind", default="plan",
                        help="a schedule kind (dualpipev, zbv, zb-h1, interleaved-1f1b, 1f1b, gpipe), or 'plan' for "
                             "the planner's choice among linear and V placements [plan]")
    parser.add_argument("--memory-limit", type=float, default=None,
                        help="for --kind plan: peak activations per rank, in 1/R slices of the model")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--sequences", type=int, default=2, help="sequences per micro-batch [2]")
    parser.add_argument("--context", type=int, default=64, help="bytes per sequence [64]")
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--corpus", help="a text file (default: Debian's fortunes)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--backend", default="gloo", choices=["gloo", "nccl"])
    args = parser.parse_args()
    if args.ranks < 1 or args.microbatches < 1 or args.steps < 1:
        parser.error("--ranks, --microbatches and --steps must be at least 1")
    if args.width % args.heads:
        parser.error(f"--width {args.width} must be a multiple of --heads {args.heads}")
    try:
        schedule = pick_schedule(args)  # bad sizes are refused here, before any process starts
        schedule.to_pytorch()
    except ValueError as e:
        parser.error(str(e))
    text = read_corpus(args.corpus)
    if len(text) < args.context + 2:
        parser.error(f"the corpus has {len(text)} bytes, fewer than --context + 2")
    print(f"corpus: {len(text)} bytes; uniform guess {math.log(VOCAB):.4f} nats per byte", flush=True)
    mp.spawn(run_rank, args=(args, free_port(), text), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()
