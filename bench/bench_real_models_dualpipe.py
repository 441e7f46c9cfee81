"""Real models under DualPipe (both directions), side by side in one run: dualpipe.DualPipe (as it comes, with the
shapes between stages declared as a user of the reference declares them, and with each overlapped pair run whole as
the reference runs it, DUALPIPE_SPLIT_PAIRS=0) against DeepSeek's reference DualPipe, on the Llama 3 and
DeepSeek-V3-style MoE stages of bench_real_models.py (torchtitan's cut, R stages, rank r holding stage r and its
mirror R-1-r). PyTorch has no DualPipe schedule class, so this is ours against the reference alone.

Both run in the same processes, on copies of the same stages, a step of each in turn, every step timed between
barriers; ranks 0 and R-1 feed half of the batch each and compute the other half's losses, as the reference's step
takes them. Prints per case the median step with its range, the first step's losses compared, the ratios, and the
busiest rank's time in compute under ours (record_actions) and under the reference (its compute chunks).

    python bench/bench_real_models_dualpipe.py --reference PATH [--cases llama3-pp2,llama3-pp4,deepseek-v3-pp2]
                                               [--steps 20] [--microbatches 8] [--sequences 2] [--seq-len 32]
                                               [--dim 64]
"""
import argparse
import copy
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_real_models as shared  # noqa: E402
import real_models  # noqa: E402  (tests/python, put on the path by bench_real_models)

NAMES = {"ours": "dualpipe.DualPipe", "declared": "ours, shapes declared", "whole": "ours, pairs whole",
         "reference": "reference DualPipe"}


def make_step(runtime, modules, rank, ranks, x, y, microbatches, width, reference):
    """A step of `runtime` on this rank's two modules: the ends feed their half of the batch and the labels of the
    half entering at the other end."""
    import dualpipe
    between_stages = [(x.shape[0] // microbatches, x.shape[1], width)]
    computed = None
    if runtime == "reference":
        pipe = shared.reference_on_cpu(reference, reference.DualPipe, modules, between_stages)
        computed = shared.clock_reference_compute(pipe)
    else:
        pipe = dualpipe.DualPipe(tuple(modules), record_actions=True)
    halves_x, halves_y = x.chunk(2), y.chunk(2)
    built = []

    def step():
        if runtime != "reference" and not built:  # ours reads these when its first step builds the pipeline
            dualpipe.set_p2p_tensor_shapes(between_stages if runtime == "declared" else [])
            os.environ["DUALPIPE_SPLIT_PAIRS"] = "0" if runtime == "whole" else "1"
            built.append(True)
        if rank in (0, ranks - 1):
            mine = 0 if rank == 0 else 1
            loss, _ = pipe.step(halves_x[mine], num_chunks=microbatches, criterion=real_models.cross_entropy,
                                labels=(halves_y[1 - mine],))
            return loss.detach()
        pipe.step(num_chunks=microbatches)
        return None
    step.pipe, step.computed = pipe, computed
    return step


def run_rank(rank, ranks, model_name, args, port, out):
    torch.set_num_threads(1)
    reference = shared.load_reference(args.reference)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=ranks, rank=rank)
    config = shared.model_config(model_name, args)
    torch.manual_seed(0)
    stages = real_models.split(real_models.Transformer(config), ranks)
    x, y = real_models.tokens(config, args.microbatches * args.sequences, args.seq_len)
    runtimes = list(NAMES)
    copies = {r: [copy.deepcopy(stages[s]) for s in (rank, ranks - 1 - rank)] for r in runtimes}
    steps = {r: make_step(r, copies[r], rank, ranks, x, y, args.microbatches, config.dim, reference) for r in runtimes}
    times, first_loss, computing = {r: [] for r in runtimes}, {}, {"ours": [], "reference": []}
    for i in range(args.steps + 1):
        for runtime in runtimes:
            dist.barrier()
            start = time.perf_counter()
            loss = steps[runtime]()
            dist.barrier()
            if i == 0:
                first_loss[runtime] = loss
            else:
                times[runtime].append(time.perf_counter() - start)
                if runtime == "ours":
                    computing["ours"].append(shared.computing_seconds(steps[runtime].pipe.last_step_actions()))
                elif runtime == "reference":
                    computing["reference"].append(steps[runtime].computed[-1])
            for m in copies[runtime]:
                m.zero_grad(set_to_none=True)
    computings = [None] * ranks
    dist.all_gather_object(computings, computing)
    if rank == 0:
        torch.save({"times": times, "loss": first_loss, "computing": computings}, out)
    dist.destroy_process_group()


def report(case, result, args):
    model_name, ranks = shared.CASES[case]
    config = shared.model_config(model_name, args)
    tokens = args.microbatches * args.sequences * args.seq_len
    print(f"\n{case} DualPipe ({ranks} Gloo processes, {ranks} stages of {config.n_layers // ranks} layers, two "
          f"copies of each, dim {config.dim}, {args.microbatches} micro-batches x {args.sequences} sequences of "
          f"{args.seq_len} tokens):")
    print(f"  {'runtime':<26}{'step ms':>10}{'range ms':>18}{'tokens/s':>10}{'loss diff':>11}")
    medians = {}
    for r, name in NAMES.items():
        t = result["times"][r]
        medians[r] = statistics.median(t)
        diff = (result["loss"][r].double() - result["loss"]["ours"].double()).abs().max().item()
        print(f"  {name:<26}{medians[r] * 1e3:>10.1f}{min(t) * 1e3:>9.1f}-{max(t) * 1e3:<8.1f}"
              f"{tokens / medians[r]:>10.0f}{diff:>11.3g}")
    busiest, theirs = (max(statistics.median(c[r]) for c in result["computing"]) for r in ("ours", "reference"))
    floor = (f" (compute alone: {busiest / medians['reference']:.3f})" if ranks <= (os.cpu_count() or 1) else "")
    print(f"  our busiest rank computed {busiest * 1e3:.1f} ms a step (median)")
    print(f"  ours / {NAMES['reference']}: {medians['ours'] / medians['reference']:.3f}{floor}")
    print(f"  ours declared / {NAMES['reference']}: {medians['declared'] / medians['reference']:.3f}")
    print(f"  ours, pairs split / ours, pairs whole: {medians['ours'] / medians['whole']:.3f}")
    if floor:
        print(f"  the reference's busiest rank computed {theirs * 1e3:.1f} ms a step (median): its step is "
              f"{medians['reference'] / theirs:.2f} times its compute, ours {medians['ours'] / busiest:.2f} times ours")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference", required=True,
                        help="a checkout of deepseek-ai/DualPipe (the folder holding dualpipe/)")
    parser.add_argument("--cases", default=",".join(shared.CASES), help=f"of {', '.join(shared.CASES)}")
    parser.add_argument("--steps", type=int, default=20, help="timed steps of each runtime (after one untimed)")
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--sequences", type=int, default=2, help="sequences per micro-batch")
    parser.add_argument("--seq-len", type=int, default=32)
    parser.add_argument("--dim", type=int, default=64, help="the models' width")
    args = parser.parse_args()
    if not os.path.isfile(os.path.join(args.reference, "dualpipe", "dualpipe.py")):
        parser.error(f"--reference {args.reference}: no dualpipe/dualpipe.py there (give the checkout's root)")
    cases = args.cases.split(",")
    for case in cases:
        if case not in shared.CASES:
            parser.error(f"--cases: {case!r} is not one of {', '.join(shared.CASES)}")
    print(f"DualPipe on real model stages, CPU, Gloo, one intra-op thread per rank; median of {args.steps} steps")
    for case in cases:
        model_name, ranks = shared.CASES[case]
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "result.pt")
            mp.spawn(run_rank, args=(ranks, model_name, args, shared.free_port(), out), nprocs=ranks, join=True)
            report(case, torch.load(out), args)


if __name__ == "__main__":
    main()
