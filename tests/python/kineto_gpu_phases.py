"""The CUDA variant of kineto_program.py's phases, run by scripts/gpu_check.sh where a GPU is lent: DeepSeek-style
regions `attn(F)`, `dispatch(F)`, `mlp(F)` and `combine(F)` inside a `1F1B` chunk-pair region, where each exchange
is an NCCL all-to-all (a one-rank group: one GPU has no peer) issued on a side stream and waited for only at its
first use, so that it runs beside the next phase's matrix products. The program times every phase's work on the
GPU itself with CUDA events, then checks what `dualpipe profile --kineto` reads from the trace:

- each phase's compute and communication within 5% of its CUDA events;
- the costs: F is the (F) phases' compute, a2a their communication, per chunk pair.

    python kineto_gpu_phases.py OUT_DIR DUALPIPE     # exit 0 when every check holds; prints each figure
"""
import json
import os
import subprocess
import sys

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, record_function

LAYERS = 2


def main(out_dir, dualpipe):
    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
    torch.manual_seed(0)
    a = torch.randn(2048, 2048, device="cuda")
    b = torch.randn(2048, 2048, device="cuda")
    tokens = torch.randn(64 << 20 >> 2, device="cuda")  # 64 MiB per exchange
    received = torch.empty_like(tokens)
    side = torch.cuda.Stream()
    timed = {}  # phase -> [(start event, end event)]: compute on the default stream, exchanges on the side one

    def timing(name, stream):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        timed.setdefault(name, []).append((start, end))
        start.record(stream)
        return end

    def products(name, count):
        with record_function(name):
            end = timing(name, torch.cuda.current_stream())
            y = a
            for _ in range(count):
                y = torch.tanh(y @ b)
            end.record()

    def exchange(name):
        """Issued on the side stream after the work before it; the default stream waits for it at its first use."""
        with record_function(name):
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                end = timing(name, side)
                dist.all_to_all_single(received, tokens)
                end.record(side)
        return side

    def chunk():
        with record_function("1F1B"):
            for _ in range(LAYERS):
                products("attn(F)", 6)
                exchange("dispatch(F)")
                products("mlp(F)", 8)  # beside the dispatch
                torch.cuda.current_stream().wait_stream(side)
                exchange("combine(F)")
                torch.cuda.current_stream().wait_stream(side)

    for _ in range(2):  # warm-up: cuBLAS, NCCL's communicator
        chunk()
    torch.cuda.synchronize()
    timed.clear()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(4):
            chunk()
        torch.cuda.synchronize()
    trace = os.path.join(out_dir, "gpu_phases_trace.json")
    prof.export_chrome_trace(trace)
    dist.destroy_process_group()
    measured = {name: sum(s.elapsed_time(e) * 1e3 for s, e in pairs) / len(pairs) for name, pairs in timed.items()}
    # A one-rank all-to-all may be NCCL's kernel or a device-to-device copy on the side stream: either is the
    # exchange here (the default stream copies nothing).
    report = json.loads(subprocess.run([dualpipe, "profile", "--kineto", trace, "--format", "json", "--comm-kernel",
                                        "^Memcpy DtoD"], check=True, capture_output=True, text=True).stdout)
    regions = {r["name"]: r for r in report["regions"]}
    failed = 0

    def check(what, got, want):
        nonlocal failed
        ok = abs(got - want) <= 0.05 * want + 5
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {what}: dualpipe {got:.1f} us, CUDA events {want:.1f} us")

    for name in ("attn(F)", "mlp(F)"):
        check(f"{name} compute per occurrence", regions[name]["compute"], measured[name])
    for name in ("dispatch(F)", "combine(F)"):
        check(f"{name} communication per occurrence", regions[name]["communication"], measured[name])
    costs = {s["cost"]: s["value"] for s in report["cost_sources"]}
    forward_compute = LAYERS * (measured["attn(F)"] + measured["mlp(F)"])
    check("F per chunk pair (compute of the (F) phases)", costs["F"], forward_compute)
    check("a2a per chunk pair", costs["a2a"], LAYERS * (measured["dispatch(F)"] + measured["combine(F)"]))
    dispatch = regions["dispatch(F)"]
    print(f"dispatch(F)'s exchange beside compute: {dispatch['overlapped'] / max(dispatch['communication'], 1):.0%} "
          "(it runs beside mlp(F)'s products)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
