"""`dualpipe profile --kineto` against tests/trace/kineto_by_hand.py, an independent reading of the same trace in
plain Python, on random GPU traces in the shape of DeepSeek's published DualPipe profile: phases annotated on the
CPU, nested in steps, on two threads; kernels launched from those threads and from a third with no annotation of its
own (autograd's), running later on three streams; DeepEP's and NCCL's kernels among them. Every region's count,
median duration, compute, communication and overlapped communication, and the whole trace's, must agree.

By hand, on DeepSeek's own published trace (deepseek-ai/profile-data, train.json), the command to compare with is
`python tests/trace/kineto_by_hand.py train.json` (docs/profile.md)."""
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

BY_HAND = Path(__file__).resolve().parents[1] / "trace" / "kineto_by_hand.py"
KERNELS = ["void cutlass::device_kernel<gemm>", "void dpsk::ep::internode::dispatch<false, 8>(int4*)",
           "void deep_ep::intranode::combine<8>(int4*)", "ncclDevKernel_AllReduce_Sum_f32", "rotary_kernel",
           "void at::native::elementwise_kernel<128, 2>"]
PHASES = ["attn(F)", "dispatch(F)", "mlp(B)", "combine(B)", "mlp(W)"]


def complete(cat, name, pid, tid, ts, dur, correlation=None):
    event = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if correlation is not None:
        event["args"] = {"correlation": correlation}
    return event


def random_trace(seed):
    rng = random.Random(seed)
    events = []

    def annotate(tid, start, end, depth):
        t = start
        while True:
            length = rng.uniform(5, 120) / (depth + 1)
            if t + length > end:
                return
            events.append(complete("user_annotation", rng.choice(PHASES) if depth else "step", 100, tid, t, length))
            if depth < 2 and rng.random() < 0.6:
                annotate(tid, t + 0.5, t + length - 0.5, depth + 1)
            t += length + rng.uniform(0.1, 10)

    for tid in (1, 2):
        annotate(tid, rng.uniform(0, 5), 1000, 0)
    for correlation in range(1, 301):
        ts = rng.uniform(0, 1000)
        events.append(complete("cuda_runtime", "cudaLaunchKernel", 100, rng.choice((1, 2, 3)), ts, 0.5, correlation))
        events.append(complete("kernel", rng.choice(KERNELS), 0, rng.choice((7, 13, 20)), ts + rng.uniform(1, 500),
                               rng.uniform(0.5, 40), correlation))
    rng.shuffle(events)  # the reader takes events in any order
    return {"traceEvents": events}


@pytest.mark.parametrize("seed", range(5))
def test_the_command_reads_random_traces_as_the_reading_by_hand_does(dualpipe, tmp_path, seed):
    path = tmp_path / f"random{seed}.json"
    path.write_text(json.dumps(random_trace(seed)))
    ours = json.loads(subprocess.run([dualpipe, "profile", "--kineto", str(path), "--format", "json"],
                                     capture_output=True, text=True, check=True).stdout)
    theirs = json.loads(subprocess.run([sys.executable, str(BY_HAND), str(path)], capture_output=True, text=True,
                                       check=True).stdout)
    assert ours["attribution"] == "launches"
    for field in ("compute", "communication", "overlapped"):
        assert ours[field] == pytest.approx(theirs[field], rel=1e-9, abs=1e-6), field
    regions = {r["name"]: r for r in ours["regions"]}
    assert set(regions) == set(theirs["regions"])
    for name, expected in theirs["regions"].items():
        got = regions[name]
        assert got["count"] == expected["count"], name
        for field in ("median_duration", "compute", "communication", "overlapped"):
            assert got[field] == pytest.approx(expected[field], rel=1e-9, abs=1e-6), (name, field)
    # Kernels were owned: the check is not of empty regions.
    assert sum(r["compute"] + r["communication"] for r in ours["regions"]) > 0
