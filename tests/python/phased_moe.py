"""A Python MoE block whose overlapped_forward_backward is built by dualpipe.phases (docs/python.md, "Phases"),
trained by dualpipe.DualPipe and checked against one process.

Four processes on Gloo: two DualPipe pipelines of two ranks (replicas 0 and 1, pipeline groups {0, 1} and {2, 3})
whose stages exchange their tokens with the other replica's same rank (expert-parallel groups {0, 2} and {1, 3}):
attention, dispatch (all-to-all), experts, combine (all-to-all), the residual sum. Every rank holds the same
experts, so each token gets what one process holding the whole model gives it, wherever it is sent; the reference
runs both replicas' micro-batches through the two stages in one process.

Each rank checks, against the reference: its losses and outputs (equal); its parameters' gradients, the two copies of each
stage summed as DeepSeek's example does, and the experts' also summed over their expert-parallel group (the tokens
of both replicas went through them); and that overlapped_forward_backward ran.

    python phased_moe.py        prints one line per rank and exits 0 when every rank passed
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import dualpipe
from dualpipe.phases import AllToAll, Compute, Phases

from rank_checks import check, cosine_distance
from ranks import free_port, start_ranks

HIDDEN, SEQ, ROWS, CHUNKS, STAGES = 16, 4, 2, 8, 2
pairs = 0  # overlapped_forward_backward calls in this process
TIMEOUT = 120  # seconds: the pipeline's, which the phases' exchanges wait within


class MoEBlock(nn.Module):
    """x + attention-like mixing, then + experts(tokens) routed over the expert-parallel group and back."""

    def __init__(self, ep_group=None):
        super().__init__()
        self.mix = nn.Linear(HIDDEN, HIDDEN)
        self.up = nn.Linear(HIDDEN, 2 * HIDDEN)
        self.down = nn.Linear(2 * HIDDEN, HIDDEN)
        self.ep_group = ep_group

    def attention(self, x):
        h = x + torch.tanh(self.mix(x))
        return h, F.layer_norm(h, (HIDDEN,))

    def experts(self, t):
        return self.down(F.gelu(self.up(t)))

    phases = Phases(
        Compute("attn", lambda m, x: m.attention(x)),  # -> (residual, tokens to send)
        AllToAll("dispatch", group=lambda m: m.ep_group),
        Compute("experts", lambda m, h, t: (h, m.experts(t))),
        AllToAll("combine", group=lambda m: m.ep_group),
        Compute("combine", lambda m, h, r: h + r),
    )
    forward = phases.forward
    _pair = phases.overlapped_forward_backward

    @classmethod
    def overlapped_forward_backward(cls, *args):
        global pairs
        pairs += 1
        # The pair's exchanges wait within the pipeline's timeout (given below), not the group's.
        check(dualpipe.phases.step_timeout == TIMEOUT, f"a pair saw step_timeout {dualpipe.phases.step_timeout}")
        return cls._pair.__func__(cls, *args)


def reference_forward(block, x):
    h, t = block.attention(x)
    return h + block.experts(t)


def criterion(output, target):
    return F.mse_loss(output, target)


def make_blocks(ep_group=None):
    torch.manual_seed(5)
    return [MoEBlock(ep_group) for _ in range(STAGES)]


def data(replica):
    g = torch.Generator().manual_seed(100 + replica)
    return (torch.randn(CHUNKS * ROWS, SEQ, HIDDEN, generator=g), torch.randn(CHUNKS * ROWS, SEQ, HIDDEN, generator=g))


def reference(replica):
    """Losses, outputs and gradients of one replica's step in one process."""
    blocks = make_blocks()
    x, l = data(replica)
    losses, outputs = [], []
    for mx, ml in zip(x.chunk(CHUNKS), l.chunk(CHUNKS)):
        y = mx
        for b in blocks:
            y = reference_forward(b, y)
        loss = criterion(y, ml)
        loss.backward()
        losses.append(loss.detach())
        outputs.append(y.detach())
    return torch.stack(losses), torch.cat(outputs), [{n: p.grad for n, p in b.named_parameters()} for b in blocks]


def run_rank(rank, port):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=4, rank=rank)
    try:
        replica, pipeline_rank = divmod(rank, 2)
        pipelines = [dist.new_group([0, 1]), dist.new_group([2, 3])]
        experts = [dist.new_group([0, 2]), dist.new_group([1, 3])]
        blocks = make_blocks(experts[pipeline_rank])
        local = [blocks[pipeline_rank], blocks[STAGES - 1 - pipeline_rank]]
        pipe = dualpipe.DualPipe(local, process_group=pipelines[replica], timeout=TIMEOUT)
        # DualPipe feeds half of the micro-batches at each end; rank 0 computes the losses of those that entered at
        # rank 1, and the other way round.
        first = pipeline_rank == 0
        x, l = data(replica)
        mine = 1 if first else 0
        loss, outputs = pipe.step(x.chunk(2)[1 - mine], num_chunks=CHUNKS, criterion=criterion,
                                  labels=(l.chunk(2)[mine],), return_outputs=True)
        ref_losses, ref_outputs, ref_grads = reference(replica)
        other_grads = reference(1 - replica)[2]
        check(torch.equal(loss, ref_losses.chunk(2)[mine]), f"rank {rank}: losses differ")
        check(torch.equal(outputs, ref_outputs.chunk(2)[mine]),
              f"rank {rank}: outputs differ")
        # The two copies of each stage: their gradients summed over the pipeline, as the reference's example does.
        group = pipelines[replica]
        stage = pipeline_rank
        for (name, p0), p1 in zip(local[0].named_parameters(), local[1].parameters()):
            copies = [torch.empty_like(p1.grad) for _ in range(2)]
            dist.all_gather(copies, p1.grad, group=group)
            got = p0.grad + copies[1 - pipeline_rank]
            expected = ref_grads[stage][name]
            if name.startswith(("up", "down")):  # the experts saw both replicas' tokens
                dist.all_reduce(got, group=experts[pipeline_rank])
                expected = expected + other_grads[stage][name]
            d = cosine_distance(got, expected)
            check(d < 1e-12, f"rank {rank}: stage {stage} {name}: cosine distance {d} to one process")
        check(pairs > 0, f"rank {rank}: overlapped_forward_backward never ran")
        print(f"rank {rank}: phased MoE block under DualPipe: losses and outputs equal to one process, gradients "
              f"within cosine distance 1e-12, {pairs} overlapped pairs built from the phases", flush=True)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    start_ranks(run_rank, (free_port(),), 4)
