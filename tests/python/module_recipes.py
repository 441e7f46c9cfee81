"""The modules people write, under dualpipe.DualPipe and DualPipeV, each checked against one process running the
whole model on the same micro-batches (losses torch.equal, gradients within cosine distance 1e-13):

    python module_recipes.py linear            nn.Linear stages: the backward split through the autograd graph, every
                                               parameter gradient accumulated at a W (or B, or overlapped) action,
                                               none at an I
    python module_recipes.py checkpoint        torch.utils.checkpoint (non-reentrant) inside a stage, automatic split
                                               (W accumulates, as for linear)
    python module_recipes.py checkpoint-store  the same around the reference's LinearFunc
                                               (dualpipe.utils.WeightGradStore)
    python module_recipes.py compile           torch.compile'd stages (aot_eager backend)
    python module_recipes.py autocast          torch.autocast(bfloat16) around the step
    python module_recipes.py dp                DualPipe at PP 2 x DP 2: reduce_gradients() sums the two copies of every
                                               stage and the data-parallel replicas (dp_group)

Two ranks (four for dp) over Gloo, one thread each, on the CPU or (--device cuda) sharing a GPU. Prints one line
per rank and exits 0 when every check passed."""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

import dualpipe
from dualpipe.utils import WeightGradStore

from rank_checks import check, cosine_distance
from ranks import free_port, start_ranks

CHUNKS, ROWS, POSITIONS, WIDTH = 8, 2, 4, 16
store_counts = {"put aside": 0, "ran later": 0}  # StoreLinearFunc's weight gradients in this process


class Mlp(nn.Module):
    """LayerNorm, then a 4x MLP with a residual: nn.Linear and friends, no custom autograd code."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.up, self.down = nn.Linear(WIDTH, 4 * WIDTH), nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


class CheckpointedMlp(Mlp):
    def forward(self, x):
        return checkpoint(super().forward, x, use_reentrant=False)


class StoreLinearFunc(torch.autograd.Function):
    """The reference's LinearFunc, the weight gradient put aside while WeightGradStore is enabled, with one change
    for checkpointing: the gradient goes to the Parameter kept on ctx. Under non-reentrant checkpointing the saved
    weight is a recomputed alias of the Parameter, and a gradient added to the alias's .grad is lost, in plain
    PyTorch too (docs/python.md, "Activation checkpointing")."""

    @staticmethod
    def forward(ctx, input, weight):
        ctx.save_for_backward(input, weight)
        ctx.weight = weight  # the Parameter itself
        return F.linear(input, weight)

    @staticmethod
    def backward(ctx, grad_output):
        input, _ = ctx.saved_tensors
        weight = ctx.weight
        if weight.grad is None:
            weight.grad = torch.zeros_like(weight)

        put_aside = WeightGradStore.enabled

        def grad_weight_fn():
            weight.grad += grad_output.flatten(0, -2).T @ input.flatten(0, -2)
            store_counts["ran later"] += put_aside

        if put_aside:
            store_counts["put aside"] += 1
            WeightGradStore.put(grad_weight_fn)
        else:
            grad_weight_fn()
        return grad_output @ weight, None


class CheckpointedStoreMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Parameter(torch.randn(4 * WIDTH, WIDTH) / WIDTH ** 0.5)
        self.down = nn.Parameter(torch.randn(WIDTH, 4 * WIDTH) / (4 * WIDTH) ** 0.5)

    def body(self, x):
        return x + StoreLinearFunc.apply(F.gelu(StoreLinearFunc.apply(x, self.up)), self.down)

    def forward(self, x):
        return checkpoint(self.body, x, use_reentrant=False)


STAGES = {"linear": Mlp, "checkpoint": CheckpointedMlp, "checkpoint-store": CheckpointedStoreMlp,
          "compile": Mlp, "autocast": Mlp, "dp": Mlp}


def criterion(output, target):
    return F.mse_loss(output.float(), target).clone()


def reference(full, x, labels, chunks, context):
    """One process, the whole model, micro-batch after micro-batch: the losses and the summed gradients."""
    losses = []
    for micro_x, micro_l in zip(x.chunk(chunks), labels.chunk(chunks)):
        with context():
            loss = criterion(full(micro_x), micro_l)
        loss.backward()
        losses.append(loss.detach())
    return torch.stack(losses)


def accumulation_times(modules):
    """Records when each parameter's gradient is accumulated (post-accumulate-grad hooks)."""
    times = []
    for p in modules.parameters():
        p.register_post_accumulate_grad_hook(lambda _p: times.append(time.monotonic()))
    return times


def check_accumulated_at_w(rank, times, actions):
    """No parameter gradient is accumulated inside an I action, and every W action accumulates some."""
    def kind_at(t):
        for action, start, end in actions:
            if start <= t <= end:
                return action
        return None

    kinds = [kind_at(t) for t in times]
    at_i = [k for k in kinds if k and k[1:].lstrip("0123456789")[:1] == "I"]
    check(not at_i, f"rank {rank}: parameter gradients accumulated inside I actions {sorted(set(at_i))}")
    w_actions = [a for a, _, _ in actions if a.lstrip("0123456789")[:1] == "W"]
    check(w_actions, f"rank {rank}: no W action")
    empty = [a for a in w_actions if a not in kinds]
    check(not empty, f"rank {rank}: W actions that accumulated nothing: {empty}")
    return len(w_actions), sum(1 for k in kinds if k in w_actions)


def run_rank(rank, world, case, port, device):
    torch.set_num_threads(1)
    torch.set_default_device(device)  # on a GPU the ranks share it; Gloo carries the boundaries through the host
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=world, rank=rank)
    try:
        print(check_case(rank, world, case, device), flush=True)
    finally:
        dist.destroy_process_group()


def check_case(rank, world, case, device):
    torch.manual_seed(7)
    dp = 2 if case == "dp" else 1
    pp = world // dp
    kind = dualpipe.DualPipe if case == "dp" else dualpipe.DualPipeV
    num_stages = pp if case == "dp" else 2 * pp
    full = nn.Sequential(*[STAGES[case]() for _ in range(num_stages)])
    batch = CHUNKS * ROWS
    x = torch.randn(dp * batch, POSITIONS, WIDTH)
    labels = torch.randn(dp * batch, POSITIONS, WIDTH)
    autocast = (lambda: torch.autocast(device, dtype=torch.bfloat16)) if case == "autocast" else torch.enable_grad
    loss_ref = reference(full, x, labels, dp * CHUNKS, autocast)

    replica, p = divmod(rank, pp)
    stages = [p, pp - 1 - p] if case == "dp" else [p, 2 * pp - 1 - p]
    local = nn.Sequential(*[STAGES[case]() for _ in stages])
    for module, s in zip(local, stages):
        module.load_state_dict(full[s].state_dict())
    pipeline_groups = [dist.new_group(list(range(d * pp, (d + 1) * pp))) for d in range(dp)]
    dp_groups = [dist.new_group([d * pp + q for d in range(dp)]) for q in range(pp)] if dp > 1 else [None] * pp
    modules = [torch.compile(m, backend="aot_eager") for m in local] if case == "compile" else list(local)
    model = kind(modules, process_group=pipeline_groups[replica], dp_group=dp_groups[p], record_actions=True)
    # Where the split goes through the autograd graph, W does the parameters' work.
    times = accumulation_times(local) if case in ("linear", "checkpoint", "autocast") else None

    # This replica's share of the batch; DualPipe feeds half from each end (rank 0 and rank R-1).
    mine = slice(replica * batch, (replica + 1) * batch)
    my_x, my_l, my_ref = x[mine], labels[mine], loss_ref[replica * CHUNKS:(replica + 1) * CHUNKS]
    if kind is dualpipe.DualPipe:
        first, last = p == 0, p == pp - 1
        half = batch // 2
        step_x = my_x[:half] if first else my_x[half:] if last else None
        step_l = my_l[half:] if first else my_l[:half] if last else None
        expected = my_ref[CHUNKS // 2:] if first else my_ref[:CHUNKS // 2] if last else None
    else:
        step_x, step_l = (my_x, my_l) if p == 0 else (None, None)
        expected = my_ref if p == 0 else None
    with autocast():
        loss, _ = model.step(step_x, num_chunks=CHUNKS, criterion=criterion, labels=(step_l,))
    if expected is not None:
        check(torch.equal(loss, expected), f"rank {rank}: losses {loss} differ from one process's {expected}")
    else:
        check(loss is None, f"rank {rank}: a loss on a rank that computes none")
    if case == "dp":
        model.reduce_gradients()
    worst = 0.0
    for (name, q), q_ref in zip(local.named_parameters(), nn.Sequential(*[full[s] for s in stages]).parameters()):
        worst = max(worst, cosine_distance(q.grad, q_ref.grad))
        check(worst < 1e-13, f"rank {rank}: gradient of {name}: cosine distance {worst} to one process")
    line = f"rank {rank}: {case} losses equal, gradients within cosine distance 1e-13 (worst {worst:.1e})"
    if case == "checkpoint-store":
        check(store_counts["ran later"] == store_counts["put aside"],
              f"rank {rank}: {store_counts['put aside']} weight gradients put aside, {store_counts['ran later']} ran")
        line += f", {store_counts['put aside']} weight gradients put aside in WeightGradStore, each run once"
    if times is not None:
        w_actions, at_w = check_accumulated_at_w(rank, times, model.last_step_actions())
        line += f", {at_w} gradient accumulations in the {w_actions} W actions, none in an I"
    return line


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("case", choices=sorted(STAGES))
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="where every rank computes (cuda: the ranks share GPU 0, scripts/gpu_check.sh)")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: this machine has no CUDA GPU")
    world = 4 if args.case == "dp" else 2
    start_ranks(run_rank, (world, args.case, free_port(), args.device), world)
    print(f"{args.case}: every check passed")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
