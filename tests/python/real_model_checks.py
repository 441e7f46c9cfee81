"""Real models (real_models.py: Llama 3 and a DeepSeek-V3-style MoE cut as torchtitan cuts them) under dualpipe,
each against an independent reference:

    python real_model_checks.py llama3        dualpipe.DualPipeV on Llama 3 stages against one process (losses
                                              torch.equal, gradients within cosine distance 1e-13)
    python real_model_checks.py deepseek-v3   the same on the MoE stages (both: DualPipeV's pairs run as two
                                              actions, these modules having no overlap hook; whole with
                                              DUALPIPE_SPLIT_PAIRS=0)
    python real_model_checks.py shapes        four steps whose sequence length changes (16, 16, 12, 16) with nothing
                                              declared: each step equal to one process (the runtime posts a step's
                                              receives at the shapes the last one learned, and must notice the
                                              change)
    python real_model_checks.py declared      the shapes between stages declared as a user of DeepSeek's reference does
                                              (set_p2p_tensor_shapes; the first stage takes token ids, the last
                                              returns logits): equal to one process; a declaration the stages do
                                              not match refused on both ranks before a message moves
    python real_model_checks.py schedule      dualpipe.pytorch.ScheduleDualPipeV (PyTorch's PipelineStages) against
                                              PyTorch's own ScheduleDualPipeV on copies of the same stages: losses
                                              and eval() losses torch.equal, gradients within cosine distance 1e-13

    python real_model_checks.py fsdp          PP 2 x DP 2 (four ranks): every stage module wrapped in FSDP2's
                                              fully_shard over its data-parallel replicas, under DualPipeV;
                                              gradients within 1e-6 of one process running the whole batch, and
                                              accumulated at W actions, none at an I

Two ranks over Gloo (four for fsdp), one thread each, on the CPU or (--device cuda) sharing a GPU. Prints one line per rank and exits 0 when every check passed."""
import argparse
import copy
import os
import sys
import time

import torch
import torch.distributed as dist

import dualpipe
import real_models
from module_recipes import check_accumulated_at_w
from rank_checks import check, cosine_distance
from ranks import free_port, start_ranks

CHUNKS, SEQUENCES, SEQ_LEN = 8, 1, 16
TINY = {"llama3": real_models.Config(dim=64, n_layers=4, n_heads=4, n_kv_heads=2, vocab_size=128, multiple_of=32),
        "deepseek-v3": real_models.Config(dim=64, n_layers=4, n_heads=4, n_kv_heads=4, vocab_size=128, moe=True,
                                          n_experts=4, top_k=2, moe_hidden=32, route_scale=2.5)}


def one_process(model, x, y):
    losses = []
    for micro_x, micro_y in zip(x.tensor_split(CHUNKS), y.tensor_split(CHUNKS)):
        loss = real_models.cross_entropy(model(micro_x), micro_y)
        loss.backward()
        losses.append(loss.detach())
    return torch.stack(losses)


def worst_distance(rank, pairs):
    worst = 0.0
    for name, ours, theirs in pairs:
        check(ours is not None and theirs is not None, f"rank {rank}: {name} has a gradient on one side only")
        worst = max(worst, cosine_distance(ours, theirs))
        check(worst < 1e-13, f"rank {rank}: gradient of {name}: cosine distance {worst}")
    return worst


def check_against_one_process(rank, world, name):
    torch.manual_seed(0)
    model = real_models.Transformer(TINY[name])
    stages = real_models.split(model, 2 * world)
    x, y = real_models.tokens(model.config, CHUNKS * SEQUENCES, SEQ_LEN)
    expected = one_process(model, x, y)
    indices = (rank, 2 * world - 1 - rank)
    pipe = dualpipe.DualPipeV([stages[s] for s in indices], record_actions=True)
    loss, _ = pipe.step(*((x,) if rank == 0 else ()), num_chunks=CHUNKS, criterion=real_models.cross_entropy,
                        labels=(y,) if rank == 0 else ())
    if rank == 0:
        check(torch.equal(loss, expected), f"rank {rank}: losses {loss} differ from one process's {expected}")
    whole = dict(model.named_parameters())
    pairs = [(n, p.grad, whole[n].grad) for s in indices for n, p in stages[s].named_parameters()]
    worst = worst_distance(rank, pairs)
    return (f"rank {rank}: {name} losses equal, gradients within cosine distance 1e-13 (worst {worst:.1e}), "
            f"{ran_pairs(rank, pipe.last_step_actions())}")


def ran_pairs(rank, actions):
    """These stages have no overlapped_forward_backward hook: DualPipeV's pairs run as a forward and then a backward,
    each an action of its own (split_pairs.h), unless DUALPIPE_SPLIT_PAIRS=0 keeps them whole."""
    pairs = sum(1 for name, _, _ in actions if name.startswith("("))
    whole = os.environ.get("DUALPIPE_SPLIT_PAIRS") == "0"
    check(pairs > 0 if whole else pairs == 0, f"rank {rank}: {pairs} overlapped pairs recorded with "
          f"DUALPIPE_SPLIT_PAIRS={os.environ.get('DUALPIPE_SPLIT_PAIRS')}")
    return f"{pairs} pairs run whole" if whole else "every pair run as its forward, then its backward"


def check_changing_shapes(rank, world):
    torch.manual_seed(0)
    model = real_models.Transformer(TINY["llama3"])
    stages = real_models.split(model, 2 * world)
    indices = (rank, 2 * world - 1 - rank)
    pipe = dualpipe.DualPipeV([stages[s] for s in indices])
    worst = 0.0
    for step, seq_len in enumerate((SEQ_LEN, SEQ_LEN, SEQ_LEN - 4, SEQ_LEN)):
        x, y = real_models.tokens(model.config, CHUNKS * SEQUENCES, seq_len, seed=step)
        model.zero_grad()
        for s in indices:
            stages[s].zero_grad()
        expected = one_process(model, x, y)
        loss, _ = pipe.step(*((x,) if rank == 0 else ()), num_chunks=CHUNKS, criterion=real_models.cross_entropy,
                            labels=(y,) if rank == 0 else ())
        if rank == 0:
            check(torch.equal(loss, expected), f"rank {rank}: step {step} (sequence length {seq_len}): losses {loss} "
                                               f"differ from one process's {expected}")
        whole = dict(model.named_parameters())
        worst = max(worst, worst_distance(rank, [(n, p.grad, whole[n].grad) for s in indices
                                                 for n, p in stages[s].named_parameters()]))
    return (f"rank {rank}: shapes losses equal at sequence lengths 16, 16, 12, 16, gradients within cosine distance "
            f"1e-13 (worst {worst:.1e})")


def check_declared_shapes(rank, world):
    torch.manual_seed(0)
    model = real_models.Transformer(TINY["llama3"])
    stages = real_models.split(model, 2 * world)
    x, y = real_models.tokens(model.config, CHUNKS * SEQUENCES, SEQ_LEN)
    expected = one_process(model, x, y)
    indices = (rank, 2 * world - 1 - rank)
    feed = dict(num_chunks=CHUNKS, criterion=real_models.cross_entropy, labels=(y,) if rank == 0 else ())
    try:
        dualpipe.set_p2p_tensor_shapes([(SEQUENCES, SEQ_LEN, model.config.dim)])
        pipe = dualpipe.DualPipeV([stages[s] for s in indices])
        loss, _ = pipe.step(*((x,) if rank == 0 else ()), **feed)
        if rank == 0:
            check(torch.equal(loss, expected), f"rank {rank}: losses {loss} differ from one process's {expected}")
        whole = dict(model.named_parameters())
        worst = worst_distance(rank, [(n, p.grad, whole[n].grad) for s in indices
                                      for n, p in stages[s].named_parameters()])
        dualpipe.set_p2p_tensor_shapes([(SEQUENCES, SEQ_LEN, model.config.dim + 1)])
        wrong = dualpipe.DualPipeV([copy.deepcopy(stages[s]) for s in indices])
        try:
            wrong.step(*((x,) if rank == 0 else ()), **feed)
            refusal = "none"
        except ValueError as e:
            refusal = str(e)
        # Rank 0's stage 3 and rank 1's stage 1 on zeros of the declared shapes (stage 0 takes the step's token ids).
        check(f"stage {3 if rank == 0 else 1} failed on zeros shaped like its declared inputs" in refusal,
              f"rank {rank}: a declaration the stages do not match gave {refusal!r}")
    finally:
        dualpipe.set_p2p_tensor_shapes([])
    return (f"rank {rank}: declared losses equal, gradients within cosine distance 1e-13 (worst {worst:.1e}); a wrong "
            f"declaration refused")


def check_fsdp(rank, world):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    dp, pp = 2, world // 2
    mesh = init_device_mesh(torch.get_default_device().type, (dp, pp), mesh_dim_names=("dp", "pp"))
    replica, p = divmod(rank, pp)
    torch.manual_seed(0)
    model = real_models.Transformer(TINY["llama3"])
    stages = real_models.split(model, 2 * pp)
    x, y = real_models.tokens(model.config, dp * CHUNKS * SEQUENCES, SEQ_LEN)
    # The whole batch in CHUNKS micro-batches of two replicas' rows: the mean over the replicas' sums, which is what
    # FSDP's reduce-scatter (an average) leaves.
    one_process(model, x, y)
    # Sharded over its own pipeline's ranks instead: refused, naming them.
    wrong = [fully_shard(torch.nn.Linear(4, 4), mesh=mesh["pp"]), torch.nn.Linear(4, 4)]
    try:
        dualpipe.DualPipeV(wrong, process_group=mesh["pp"].get_group())
        check(False, f"rank {rank}: a module sharded over its own pipeline was accepted")
    except ValueError as error:
        check("of this rank's own pipeline" in str(error), f"rank {rank}: unexpected error {error}")
    indices = (p, 2 * pp - 1 - p)
    modules = [stages[s] for s in indices]
    for m in modules:
        fully_shard(m, mesh=mesh["dp"])
    pipe = dualpipe.DualPipeV(modules, process_group=mesh["pp"].get_group(), record_actions=True)
    mine = slice(replica * CHUNKS * SEQUENCES, (replica + 1) * CHUNKS * SEQUENCES)
    times = None
    for step in range(2):  # the first makes FSDP's unsharded parameters, into which autograd accumulates
        if step == 1:
            for m in modules:
                m.zero_grad(set_to_none=True)
            times = accumulation_times(modules)
        pipe.step(*((x[mine],) if p == 0 else ()), num_chunks=CHUNKS, criterion=real_models.cross_entropy,
                  labels=(y[mine],) if p == 0 else ())
    w_actions, at_w = check_accumulated_at_w(rank, times, pipe.last_step_actions())
    whole = dict(model.named_parameters())
    worst = 0.0
    for s, m in zip(indices, modules):
        for name, param in m.named_parameters():
            check(param.grad is not None, f"rank {rank}: stage {s}'s {name} has no gradient")
            ours = param.grad.full_tensor()
            expected = whole[name].grad
            worst = max(worst, (ours - expected).abs().max().item())
            check(worst < 1e-6, f"rank {rank}: stage {s}'s {name}: gradient differs from one process's by {worst}")
    return (f"rank {rank}: fsdp gradients within 1e-6 of one process (worst {worst:.1e}), {at_w} gradient "
            f"accumulations in the {w_actions} W actions, none in an I; a module sharded over its own pipeline refused")


def accumulation_times(modules):
    """When autograd accumulates into FSDP's unsharded parameters (post-accumulate-grad hooks)."""
    from torch.distributed.fsdp import fully_shard
    times = []
    for m in modules:
        for fsdp_param in fully_shard.state(m)._fsdp_param_group.fsdp_params:
            fsdp_param._unsharded_param.register_post_accumulate_grad_hook(
                lambda _p: times.append(time.monotonic()))
    return times


def pipeline_stages(modules, indices, world, rank):
    from torch.distributed.pipelining import PipelineStage
    device = torch.get_default_device()
    stages = [PipelineStage(m, s, 2 * world, device) for m, s in zip(modules, indices)]
    # Gloo has no link from a process to itself: PyTorch's empty opening messages between the last rank's two
    # middle stages are left out (as in pytorch_runtime.py).
    for stage in stages:
        opening = stage._get_init_p2p_neighbors_ops
        stage._get_init_p2p_neighbors_ops = lambda opening=opening: [op for op in opening() if op.peer != rank]
    return stages


def check_schedule_against_pytorch(rank, world):
    from torch.distributed.pipelining.schedules import ScheduleDualPipeV as TorchDualPipeV
    from dualpipe.pytorch import ScheduleDualPipeV
    torch.manual_seed(0)
    model = real_models.Transformer(TINY["llama3"])
    stages = real_models.split(model, 2 * world)
    x, y = real_models.tokens(model.config, CHUNKS * SEQUENCES, SEQ_LEN)
    indices = (rank, 2 * world - 1 - rank)
    results = {}
    for name, kind in (("torch", TorchDualPipeV), ("ours", ScheduleDualPipeV)):
        modules = [copy.deepcopy(stages[s]) for s in indices]
        schedule = kind(pipeline_stages(modules, indices, world, rank), CHUNKS, loss_fn=real_models.cross_entropy)
        losses = []
        output = schedule.step(x, target=y, losses=losses) if rank == 0 else schedule.step()
        eval_losses = []
        if name == "ours":  # PyTorch 2.11's own eval() fails on its DualPipeV ("can't steal_bwd_input if this stage
            # doesn't have backward"): ours is compared with its training step's losses, the parameters unchanged
            schedule.eval(x, target=y, losses=eval_losses) if rank == 0 else schedule.eval()
        results[name] = (modules, losses, output, eval_losses)
    (theirs, their_losses, their_output, _), (ours, our_losses, our_output, our_eval) = (results["torch"],
                                                                                         results["ours"])
    if rank == 0:
        check(len(our_eval) == CHUNKS and torch.equal(torch.stack(our_eval), torch.stack(their_losses)),
              f"rank {rank}: eval() losses {our_eval} differ from PyTorch's step's {their_losses}")
        check(len(our_losses) == CHUNKS and torch.equal(torch.stack(our_losses), torch.stack(their_losses)),
              f"rank {rank}: losses {our_losses} differ from PyTorch's {their_losses}")
        check(torch.equal(our_output, their_output), f"rank {rank}: the returned outputs differ from PyTorch's")
    else:
        check(our_output is None and not our_losses, f"rank {rank}: outputs or losses on a rank without stage 0")
    pairs = [(n, p.grad, q.grad) for m_ours, m_theirs in zip(ours, theirs)
             for (n, p), q in zip(m_ours.named_parameters(), m_theirs.parameters())]
    worst = worst_distance(rank, pairs)
    return (f"rank {rank}: schedule losses equal to PyTorch's ScheduleDualPipeV, gradients within cosine distance "
            f"1e-13 (worst {worst:.1e})")


CASES = {"llama3": lambda rank, world: check_against_one_process(rank, world, "llama3"),
         "deepseek-v3": lambda rank, world: check_against_one_process(rank, world, "deepseek-v3"),
         "shapes": check_changing_shapes, "declared": check_declared_shapes,
         "schedule": check_schedule_against_pytorch, "fsdp": check_fsdp}


def run_rank(rank, world, case, port, device):
    torch.set_num_threads(1)
    torch.set_default_device(device)  # on a GPU the ranks share it; Gloo carries the boundaries through the host
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=world, rank=rank)
    try:
        print(CASES[case](rank, world), flush=True)
    finally:
        dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("case", choices=sorted(CASES))
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="where every rank computes (cuda: the ranks share GPU 0, scripts/gpu_check.sh)")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: this machine has no CUDA GPU")
    world = 4 if args.case == "fsdp" else 2
    start_ranks(run_rank, (world, args.case, free_port(), args.device), world)
    print(f"{args.case}: every check passed")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
