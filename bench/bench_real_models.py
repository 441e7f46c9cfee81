"""Real models under DualPipeV, side by side in one run: dualpipe.DualPipeV (our C++ executor; as it comes, with
the shapes between stages declared as a user of the reference declares them, with its messages through the Gloo
group's own send and recv instead of the direct links, DUALPIPE_DIRECT_LINKS=0, and with each overlapped pair run
whole as the reference runs it, DUALPIPE_SPLIT_PAIRS=0) against torch.distributed.pipelining's ScheduleDualPipeV,
on Llama 3 and DeepSeek-V3-style MoE stages cut as torchtitan's pipeline_module_split cuts them
(tests/python/real_models.py), and DeepSeek's reference DualPipeV with --reference.

Every runtime runs in the same processes, on copies of the same stages, one step of each in turn, so that all see
the same machine (whose speed drifts by tens of percent within minutes); every step is timed between barriers. The
reference's package is also named dualpipe: it is loaded beside ours under sys.modules of its own. Prints per case
the median step with its range, the ratios, the first step's losses compared, and each rank's peak bytes of saved
activations (autograd's saved tensors, parameters left out, counted once per storage) during one step of each, and
the busiest rank's time in compute actions under ours (record_actions) and under the reference (its compute chunks,
timed around the calls): with the same arithmetic, no runtime's step is much below it; and our schedule's order
simulated at the run's median per-stage costs (dualpipe.simulate), the plan beside what ran.

    python bench/bench_real_models.py [--cases llama3-pp2,llama3-pp4,deepseek-v3-pp2] [--steps 6]
                                      [--microbatches 8] [--sequences 2] [--seq-len 64] [--dim 256]
                                      [--reference PATH]
"""
import argparse
import copy
import dataclasses
import os
import re
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
import real_models  # noqa: E402

CASES = {"llama3-pp2": ("llama3", 2), "llama3-pp4": ("llama3", 4), "deepseek-v3-pp2": ("deepseek-v3", 2)}
MODELS = {"llama3": real_models.LLAMA3_SMALL, "deepseek-v3": real_models.DEEPSEEK_V3_SMALL}


def model_config(name, args):
    """The model's small configuration, at --dim when given (heads and hidden sizes scaled with it)."""
    config = MODELS[name]
    if not args.dim:
        return config
    scale = args.dim / config.dim
    return dataclasses.replace(config, dim=args.dim, moe_hidden=max(8, int(config.moe_hidden * scale)),
                               multiple_of=max(8, int(config.multiple_of * scale)))


class SavedActivations:
    """Live bytes of autograd's saved tensors on this thread, parameters left out, each storage counted once; and
    their peak."""

    def __init__(self, parameters):
        self.parameters = {p.untyped_storage().data_ptr() for p in parameters}
        self.live, self.now, self.peak = {}, 0, 0

    def pack(self, t):
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if key in self.parameters or storage.nbytes() == 0:
            return t
        entry = self.live.setdefault(key, [storage.nbytes(), 0])
        if entry[1] == 0:
            self.now += entry[0]
            self.peak = max(self.peak, self.now)
        entry[1] += 1
        return _Held(self, key, t)

    @staticmethod
    def unpack(held):
        return held.tensor if isinstance(held, _Held) else held

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)


class _Held:
    def __init__(self, meter, key, tensor):
        self.meter, self.key, self.tensor = meter, key, tensor

    def __del__(self):
        entry = self.meter.live[self.key]
        entry[1] -= 1
        if entry[1] == 0:
            self.meter.now -= entry[0]
            del self.meter.live[self.key]


def load_reference(path):
    """DeepSeek's reference package, from its checkout at `path`. It is also named dualpipe (and imports itself by
    that name): loaded while ours is out of sys.modules, which then gets ours back. Each module keeps the modules it
    imported, so both run side by side."""
    import dualpipe  # noqa: F401  (ours first, so that it is the one put back)
    ours = {name: m for name, m in sys.modules.items() if name == "dualpipe" or name.startswith("dualpipe.")}
    for name in ours:
        del sys.modules[name]
    sys.path.insert(0, path)
    try:
        import dualpipe as reference
        import dualpipe.comm  # noqa: F401
    finally:
        sys.path.remove(path)
        for name in [n for n in sys.modules if n == "dualpipe" or n.startswith("dualpipe.")]:
            del sys.modules[name]
        sys.modules.update(ours)
    return reference


def reference_on_cpu(reference, pipeline_class, modules, between_stages):
    """The reference's `pipeline_class` (its DualPipe or DualPipeV) on CPU modules, with the shapes between stages
    declared as it needs: it allocates its receive buffers on CUDA and its constructor checks the modules are there."""
    comm = reference.comm
    comm.build_from_tensor_shapes = lambda: [torch.empty(s, dtype=comm.TENSOR_DTYPE, requires_grad=True)
                                             for s in comm.TENSOR_SHAPES]
    reference.set_p2p_tensor_shapes(between_stages)
    reference.set_p2p_tensor_dtype(torch.float32)
    current_device = torch.cuda.current_device
    torch.cuda.current_device = lambda: "cpu"  # only for the constructor's check
    try:
        return pipeline_class(tuple(modules))
    finally:
        torch.cuda.current_device = current_device


def clock_reference_compute(pipe):
    """Times the compute of the reference's `pipe` (its forward, backward, pair and weight chunks, each outermost call:
    a pair calls the other two) as record_actions times ours: returns the list to which each step appends its
    seconds."""
    per_step, depth, spent = [], [0], [0.0]

    def timed(method):
        def run(*args, **kwargs):
            start = time.perf_counter()
            depth[0] += 1
            try:
                return method(*args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    spent[0] += time.perf_counter() - start
        return run

    for name in ("_forward_compute_chunk", "_backward_compute_chunk", "_forward_backward_compute_chunk",
                 "_weight_chunk"):
        setattr(pipe, name, timed(getattr(pipe, name)))  # the instance's, found before the class's
    step = pipe.step

    def timed_step(*args, **kwargs):
        spent[0] = 0.0
        result = step(*args, **kwargs)
        per_step.append(spent[0])
        return result
    pipe.step = timed_step
    return per_step


def our_step(modules, rank, x, y, microbatches, reference, width, declared=False, through_group=False,
             pairs_whole=False):
    """A step of ours (`declared`: with the shapes between stages declared, as a user of the reference declares
    them; `through_group`: its messages through the Gloo group's own send and recv instead of the direct links;
    `pairs_whole`: each overlapped pair run as one action, as the reference runs it), or with `reference` (the
    reference's package) of DeepSeek's DualPipeV."""
    import dualpipe
    between_stages = [(x.shape[0] // microbatches, x.shape[1], width)]
    if reference is not None:
        pipe = reference_on_cpu(reference, reference.DualPipeV, modules, between_stages)
        computed = clock_reference_compute(pipe)
    else:
        pipe = dualpipe.DualPipeV(tuple(modules), record_actions=True)

    built = []

    def step():
        if not built:  # ours reads the declaration and the transport when its first step builds the pipeline
            dualpipe.set_p2p_tensor_shapes(between_stages if declared else [])
            os.environ["DUALPIPE_DIRECT_LINKS"] = "0" if through_group else "1"
            os.environ["DUALPIPE_SPLIT_PAIRS"] = "0" if pairs_whole else "1"
            built.append(True)
        if rank == 0:
            loss, _ = pipe.step(x, num_chunks=microbatches, criterion=real_models.cross_entropy, labels=(y,))
            return loss.detach()
        pipe.step(num_chunks=microbatches)
        return None
    step.pipe = pipe
    if reference is not None:
        step.computed = computed
    return step


def computing_seconds(actions):
    """Of a step's recorded actions, the time in compute (forwards, backwards, their pairs; not the messages)."""
    return sum(end - start for name, start, end in actions if "SEND" not in name and "RECV" not in name)


MESSAGE = re.compile(r"(\d+)(SEND|RECV)_([FB])(\d+)$")  # the runtime's names: 1RECV_F0 is stage 1 taking F0


def replayed_step(ranks_actions):
    """One step's actions, each rank's (name, seconds) in the order they ran, replayed at those times with every
    message free: a receive waits only for its send. What this schedule takes at these compute times whatever
    carries its messages."""
    sent = {}  # (direction, producing stage, micro-batch) -> when it was sent
    clock, at = [0.0] * len(ranks_actions), [0] * len(ranks_actions)
    moved = True
    while moved:
        moved = False
        for r, actions in enumerate(ranks_actions):
            while at[r] < len(actions):
                name, seconds = actions[at[r]]
                message = MESSAGE.match(name)
                if message is None:
                    clock[r] += seconds
                else:
                    stage, kind, direction, microbatch = message.groups()
                    stage, microbatch = int(stage), int(microbatch)
                    if kind == "SEND":
                        sent[(direction, stage, microbatch)] = clock[r]
                    else:
                        producer = stage - 1 if direction == "F" else stage + 1
                        if (direction, producer, microbatch) not in sent:
                            break  # its sender has not got there yet: the other ranks go on
                        clock[r] = max(clock[r], sent[(direction, producer, microbatch)])
                at[r] += 1
                moved = True
    assert all(a == len(actions) for a, actions in zip(at, ranks_actions)), "the replay deadlocked"
    return max(clock)


COMPUTE = re.compile(r"(\d+)([FBIW])\d+$")  # 3F7: stage 3's forward of micro-batch 7


def planned_step(ranks_timelines):
    """Our schedule as it ran (each rank's compute actions in their order), simulated at the median time of each
    stage's F, B, I and W over the timed steps: the plan at this run's costs, beside what ran. Returns the costs (as
    `dualpipe simulate --cost` takes them) and the simulated step and busiest rank's compute, in seconds."""
    import dualpipe
    times = {}  # (kind, stage) -> seconds of every such action
    order = []
    for r, timelines in enumerate(ranks_timelines):
        names = [n for n, _ in timelines[0] if COMPUTE.match(n)]
        order.append(f"rank {r}: {' '.join(names)}")
        for timeline in timelines:
            for name, seconds in timeline:
                action = COMPUTE.match(name)
                if action:
                    times.setdefault((action.group(2), int(action.group(1))), []).append(seconds)
    stages = 1 + max(s for _, s in times)
    median = {key: statistics.median(t) * 1e3 for key, t in times.items()}  # ms, as the cost strings are read
    per_stage = {kind: [median.get((kind, s), 0.0) for s in range(stages)] for kind in "FBIW"}
    # The first stage has no input gradient: its I is empty and its W the whole backward, which a pair's B (run
    # whole) measures too; the cost model takes W as a part of B.
    per_stage["B"] = [max(b, w) for b, w in zip(per_stage["B"], per_stage["W"])]
    costs = ",".join(f"{kind}={':'.join(f'{t:.2f}' for t in per_stage[kind])}" for kind in "FBWI")
    simulated = dualpipe.simulate(dualpipe.Schedule.from_text("\n".join(order)), dualpipe.Costs.parse(costs))
    return costs, simulated.makespan / 1e3, max(r.busy for r in simulated.per_rank) / 1e3


def torch_step(modules, indices, rank, ranks, x, y, microbatches):
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import ScheduleDualPipeV
    stages = [PipelineStage(m, s, 2 * ranks, torch.device("cpu")) for m, s in zip(modules, indices)]
    # PyTorch opens every stage's links with a batched send and receive to each neighbour stage, the last rank's two
    # middle stages included, and Gloo has no link from a process to itself: those empty opening messages are left
    # out (as in tests/python/pytorch_runtime.py).
    for stage in stages:
        opening = stage._get_init_p2p_neighbors_ops
        stage._get_init_p2p_neighbors_ops = lambda opening=opening: [op for op in opening() if op.peer != rank]
    schedule = ScheduleDualPipeV(stages, microbatches, loss_fn=real_models.cross_entropy, scale_grads=False)

    def step():
        if rank == 0:
            losses = []
            schedule.step(x, target=y, losses=losses)
            return torch.stack(losses).detach()
        schedule.step()
        return None
    return step


def run_rank(rank, ranks, model_name, runtimes, args, port, out):
    torch.set_num_threads(1)
    reference = load_reference(args.reference) if "reference" in runtimes else None
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=ranks, rank=rank)
    config = model_config(model_name, args)
    torch.manual_seed(0)
    stages = real_models.split(real_models.Transformer(config), 2 * ranks)
    indices = (rank, 2 * ranks - 1 - rank)
    x, y = real_models.tokens(config, args.microbatches * args.sequences, args.seq_len)
    steps, copies = {}, {}
    for runtime in runtimes:
        copies[runtime] = [copy.deepcopy(stages[s]) for s in indices]
        if runtime == "torch":
            steps[runtime] = torch_step(copies[runtime], indices, rank, ranks, x, y, args.microbatches)
        else:
            steps[runtime] = our_step(copies[runtime], rank, x, y, args.microbatches,
                                      reference if runtime == "reference" else None, config.dim,
                                      declared=runtime == "declared", through_group=runtime == "group",
                                      pairs_whole=runtime == "whole")
    times = {r: [] for r in runtimes}
    computing, timelines = [], []  # ours: this rank's time in compute actions, and its actions, per timed step
    reference_computing = []  # the reference's time in its compute chunks, per timed step
    first_loss, peak = {}, {}
    for i in range(args.steps + 2):
        for runtime in runtimes:
            meter = None
            if i == 1:  # the step after the warm-up, measured for memory (its time is not counted)
                meter = SavedActivations([p for m in copies[runtime] for p in m.parameters()])
            dist.barrier()
            start = time.perf_counter()
            if meter is not None:
                with meter.hooks():
                    loss = steps[runtime]()
            else:
                loss = steps[runtime]()
            dist.barrier()
            elapsed = time.perf_counter() - start
            if i == 0:
                first_loss[runtime] = loss
            elif i == 1:
                peak[runtime] = meter.peak
            else:
                times[runtime].append(elapsed)
                if runtime == "ours":
                    actions = steps[runtime].pipe.last_step_actions()
                    computing.append(computing_seconds(actions))
                    timelines.append([(name, end - begin) for name, begin, end in actions])
                elif runtime == "reference":
                    reference_computing.append(steps[runtime].computed[-1])
            for m in copies[runtime]:
                m.zero_grad(set_to_none=True)
    peaks, computings, all_timelines = [None] * ranks, [None] * ranks, [None] * ranks
    reference_computings = [None] * ranks
    dist.all_gather_object(peaks, peak)
    dist.all_gather_object(computings, computing)
    dist.all_gather_object(all_timelines, timelines)
    dist.all_gather_object(reference_computings, reference_computing)
    if rank == 0:
        replayed = [replayed_step([t[k] for t in all_timelines]) for k in range(len(timelines))]
        torch.save({"times": times, "loss": first_loss, "peaks": peaks, "computing": computings,
                    "replayed": replayed, "planned": planned_step(all_timelines),
                    "reference_computing": reference_computings}, out)
    dist.destroy_process_group()


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(model_name, ranks, runtimes, args):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.pt")
        mp.spawn(run_rank, args=(ranks, model_name, runtimes, args, free_port(), out), nprocs=ranks, join=True)
        return torch.load(out)


NAMES = {"ours": "dualpipe.DualPipeV", "declared": "ours, shapes declared", "group": "ours, Gloo's send/recv",
         "whole": "ours, pairs whole", "torch": "torch ScheduleDualPipeV", "reference": "reference DualPipeV"}


def report(case, result, runtimes, args):
    config = model_config(CASES[case][0], args)
    tokens = args.microbatches * args.sequences * args.seq_len
    ranks = CASES[case][1]
    print(f"\n{case} ({ranks} Gloo processes, {2 * ranks} stages of {config.n_layers // (2 * ranks)} "
          f"layers, dim {config.dim}, {args.microbatches} micro-batches x {args.sequences} sequences of "
          f"{args.seq_len} tokens):")
    print(f"  {'runtime':<26}{'step ms':>10}{'range ms':>18}{'tokens/s':>10}{'loss diff':>11}  peak saved MiB per rank")
    medians = {}
    for r in runtimes:
        t = result["times"][r]
        medians[r] = statistics.median(t)
        diff = (result["loss"][r].double() - result["loss"]["ours"].double()).abs().max().item()
        mib = " ".join(f"{p[r] / 2**20:.2f}" for p in result["peaks"])
        print(f"  {NAMES[r]:<26}{medians[r] * 1e3:>10.1f}{min(t) * 1e3:>9.1f}-{max(t) * 1e3:<8.1f}"
              f"{tokens / medians[r]:>10.0f}{diff:>11.3g}  {mib}")
    print(f"  ours / {NAMES['torch']}: {medians['ours'] / medians['torch']:.3f}")
    print(f"  ours on the direct links / ours through Gloo's send and recv: {medians['ours'] / medians['group']:.3f}")
    print(f"  ours, pairs split / ours, pairs whole: {medians['ours'] / medians['whole']:.3f}")
    # All the runtimes do the same arithmetic: with a core per rank, the busiest rank's compute is a floor under any
    # of their steps (with fewer cores, the compute actions' times include waits for a core).
    busiest = max(statistics.median(c) for c in result["computing"])
    a_floor = ranks <= (os.cpu_count() or 1)
    floor = (f"at best {busiest / medians['torch']:.3f} of {NAMES['torch']}'s step without less arithmetic"
             if a_floor else "not a floor: more ranks than cores")
    print(f"  our busiest rank computed {busiest * 1e3:.1f} ms a step (median): {floor}")
    # The same actions in the schedule's order, messages free: above the busiest rank's compute by what the
    # schedule makes a rank wait for the others' compute (its fill, drain and imbalance).
    replayed = statistics.median(result["replayed"])
    if a_floor:
        print(f"  our actions replayed in their order with free messages: {replayed * 1e3:.1f} ms a step (median): "
              f"at best {replayed / medians['torch']:.3f} of {NAMES['torch']}'s step with this schedule")
        costs, planned, planned_busiest = result["planned"]
        print(f"  our order simulated at this run's median costs (--cost {costs}): {planned * 1e3:.1f} ms a step, "
              f"{planned / planned_busiest:.3f} times its busiest rank's compute")
    if "reference" in medians:
        floors = (f" (compute alone: {busiest / medians['reference']:.3f}, replayed: "
                  f"{replayed / medians['reference']:.3f})" if a_floor else "")
        print(f"  ours / {NAMES['reference']}: {medians['ours'] / medians['reference']:.3f}{floors}")
        print(f"  ours declared / {NAMES['reference']}: {medians['declared'] / medians['reference']:.3f} (the same "
              f"shapes declared as the reference's)")
        theirs = max(statistics.median(c) for c in result["reference_computing"])
        if a_floor:  # with fewer cores than ranks, both compute times include waits for a core
            print(f"  the reference's busiest rank computed {theirs * 1e3:.1f} ms a step (median; ours "
                  f"{busiest * 1e3:.1f}): its step is {medians['reference'] / theirs:.2f} times its compute, ours "
                  f"{medians['ours'] / busiest:.2f} times ours")
    return medians


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--steps", type=int, default=6, help="timed steps of each runtime (after two untimed)")
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--sequences", type=int, default=2, help="sequences per micro-batch")
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--dim", type=int, default=0, help="the models' width (default: 256, their small size)")
    parser.add_argument("--reference", help="a checkout of deepseek-ai/DualPipe (the folder holding dualpipe/)")
    args = parser.parse_args()
    cases = args.cases.split(",")
    for case in cases:
        if case not in CASES:
            parser.error(f"--cases: {case!r} is not one of {', '.join(CASES)}")
    if args.reference and not os.path.isfile(os.path.join(args.reference, "dualpipe", "dualpipev.py")):
        parser.error(f"--reference {args.reference}: no dualpipe/dualpipev.py there (give the checkout's root)")
    print(f"DualPipeV on real model stages, CPU, Gloo, one intra-op thread per rank; median of {args.steps} steps")
    runtimes = ["ours", "declared", "group", "whole", "torch"] + (["reference"] if args.reference else [])
    for case in cases:
        model_name, ranks = CASES[case]
        report(case, measure(model_name, ranks, runtimes, args), runtimes, args)


if __name__ == "__main__":
    main()
