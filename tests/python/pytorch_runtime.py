"""Runs a schedule with torch.distributed.pipelining's own runtime (`_PipelineScheduleRuntime`) on one Gloo process
per rank, over a small transformer, and gives each stage's parameter gradients; and the same model's gradients from
one process running every micro-batch through the whole model.

The schedule reaches PyTorch's runtime one of two ways: a compute-only CSV file that the runtime loads itself
(`_load_csv`, as torchtitan does), or a dualpipe schedule file that the package `dualpipe` reads and hands over as
PyTorch's action objects (`dualpipe.pytorch.load`)."""
import os
import tempfile

import torch
import torch.distributed as dist
import torch.distributed.pipelining.schedules as schedules
from torch.distributed.pipelining import PipelineStage

from ranks import free_port, start_ranks

WIDTH, SEQUENCE, SEQUENCES_PER_MICROBATCH = 16, 8, 2


def make_layers(num_stages):
    """One transformer layer per stage, the same weights in every process."""
    torch.manual_seed(0)
    return [torch.nn.TransformerEncoderLayer(WIDTH, 2, 32, dropout=0.0, batch_first=True) for _ in range(num_stages)]


def batch(microbatches):
    generator = torch.Generator().manual_seed(1)
    shape = (microbatches * SEQUENCES_PER_MICROBATCH, SEQUENCE, WIDTH)
    return torch.randn(*shape, generator=generator), torch.randn(*shape, generator=generator)


def loss_fn(output, target):
    return torch.nn.functional.mse_loss(output, target)


def csv_actions(path):
    """{rank: [_Action]} of a compute-only CSV file, read by PyTorch's own parser."""
    with open(path) as f:
        rows = f.read().rstrip("\n").split("\n")
    return {rank: [schedules._Action.from_str(t) for t in filter(None, row.strip().split(","))]
            for rank, row in enumerate(rows)}


def schedule_actions(path, loader):
    if loader == "csv":
        return csv_actions(path)
    import dualpipe
    return dualpipe.read_schedule(path).to_pytorch()


def stage_owners(actions):
    """The rank of each stage, as the schedule places them."""
    owner = {}
    for rank, row in actions.items():
        for action in row:
            for half in action.sub_actions or [action]:
                owner[half.stage_index] = rank
    return owner


def _rank(rank, world, path, loader, microbatches, port, out_dir):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    owner = stage_owners(schedule_actions(path, loader))
    layers = make_layers(len(owner))
    mine = sorted(s for s, r in owner.items() if r == rank)
    example = torch.zeros(SEQUENCES_PER_MICROBATCH, SEQUENCE, WIDTH)
    stages = [PipelineStage(layers[s], s, len(owner), torch.device("cpu"), input_args=(example,),
                            output_args=example, group=dist.group.WORLD) for s in mine]
    # PyTorch opens every stage's links with a batched send and receive to each neighbour stage. In a V the two
    # middle stages share the last rank, and Gloo has no link from a process to itself (NCCL has), so PyTorch's own
    # ZBV and DualPipeV fail here the same way. Those opening messages carry nothing, and the runtime hands a local
    # stage's output over without one, so they are left out.
    for stage in stages:
        opening = stage._get_init_p2p_neighbors_ops
        stage._get_init_p2p_neighbors_ops = lambda opening=opening: [op for op in opening() if op.peer != rank]
    runtime = schedules._PipelineScheduleRuntime(stages, microbatches, loss_fn=loss_fn, scale_grads=True)
    if loader == "csv":
        runtime._load_csv(path)  # compute-only: PyTorch lowers it with its own send/receive pass
    else:
        import dualpipe
        import dualpipe.pytorch
        dualpipe.pytorch.load(runtime, dualpipe.read_schedule(path))
    inputs, targets = batch(microbatches)
    runtime.step(inputs, target=targets)
    for s in mine:
        grads = {name: p.grad.clone() for name, p in layers[s].named_parameters()}
        torch.save(grads, os.path.join(out_dir, f"stage{s}.pt"))
    dist.barrier()
    dist.destroy_process_group()


def pipeline_gradients(path, microbatches, loader="csv"):
    """Each stage's gradients after one step of PyTorch's runtime over the schedule's ranks. loader: "csv" for a
    compute-only CSV that PyTorch loads, "dualpipe" for a schedule file (text or CSV) that dualpipe hands over."""
    actions = schedule_actions(path, loader)
    out_dir = tempfile.mkdtemp()
    start_ranks(_rank, (len(actions), path, loader, microbatches, free_port(), out_dir), len(actions))
    return [torch.load(os.path.join(out_dir, f"stage{s}.pt")) for s in range(len(stage_owners(actions)))]


def single_process_gradients(num_stages, microbatches):
    """The whole model in one process, micro-batch after micro-batch, each loss scaled by 1/M as the runtime does."""
    layers = make_layers(num_stages)
    inputs, targets = batch(microbatches)
    n = SEQUENCES_PER_MICROBATCH
    for m in range(microbatches):
        h = inputs[m * n:(m + 1) * n]
        for layer in layers:
            h = layer(h)
        (loss_fn(h, targets[m * n:(m + 1) * n]) / microbatches).backward()
    return [{name: p.grad.clone() for name, p in layer.named_parameters()} for layer in layers]
