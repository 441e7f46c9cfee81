"""The GPU counterpart of kineto_program.py, run where a GPU is lent (docs/profile.md): a forward region of matrix
products, and a region where a second stream's products run beside the default stream's, traced with
torch.profiler (CPU and CUDA). The program times every region on the GPU itself with CUDA events, the reference
`dualpipe profile --kineto` is checked against. One GPU has no peer for NCCL, so the trace has no communication.

    python kineto_gpu_program.py OUT_DIR     # writes gpu_trace.json and gpu_measured.json
"""
import json
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile, record_function


def main(out_dir):
    torch.manual_seed(0)
    a = torch.randn(2048, 2048, device="cuda")
    b = torch.randn(2048, 2048, device="cuda")
    side = torch.cuda.Stream()
    measured = {"forward": [], "two_streams": []}
    events = []

    def region(name, body):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with record_function(name):
            start.record()
            body()
            end.record()
        events.append((name, start, end))

    def forward():
        y = a
        for _ in range(8):
            y = torch.tanh(y @ b)

    def two_streams():
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            z = a
            for _ in range(8):
                z = torch.tanh(z @ b)
        y = a
        for _ in range(8):
            y = torch.tanh(y @ b)
        torch.cuda.current_stream().wait_stream(side)

    for _ in range(3):  # warm-up: cuBLAS handles, kernels loaded
        forward()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(6):
            region("forward", forward)
            region("two_streams", two_streams)
        torch.cuda.synchronize()
    for name, start, end in events:
        measured[name].append(start.elapsed_time(end) * 1e3)  # microseconds
    prof.export_chrome_trace(os.path.join(out_dir, "gpu_trace.json"))
    with open(os.path.join(out_dir, "gpu_measured.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "measured": measured}, f)


if __name__ == "__main__":
    main(sys.argv[1])
