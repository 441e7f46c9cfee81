"""dualpipe.overlap_moe on the emulated device: a DeepSeek-V3-style MoE model (tests/python/real_models.py) at
PP 2 x EP 2 under DualPipeV, with the overlap and without, side by side in the same processes
(tests/python/moe_overlap_checks.py --emulate). Each layer's attention and experts sleep F/2 in the forward and F in
the backward (the host idle, as with a GPU), and every all-to-all of tokens takes at least F/2: a layer's dispatch and
combine together take F (a2a = F, as in bench_emulated_device.py). The two runs' losses and gradients are checked
bit-identical.

Prints, per micro-batch count, each rank's exposed all-to-all time per step (time spent waiting for exchanges) with
the overlap and without, their ratio, the share hidden over all ranks, and the ratio of the median steps.

    python bench/bench_moe_overlap.py [--f-ms 10] [--microbatches 8,16,32] [--steps 4] [--layers 8]
"""
import argparse
import os
import subprocess
import sys
import tempfile

import torch

CHECKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python", "moe_overlap_checks.py")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--f-ms", type=float, default=10.0, help="F: a layer's forward, and its two all-to-alls' (ms)")
    parser.add_argument("--microbatches", default="8,16,32")
    parser.add_argument("--steps", type=int, default=4, help="steps of each run; the median of all but the first")
    parser.add_argument("--layers", type=int, default=8, help="of the model, the first dense (two per stage at 8)")
    args = parser.parse_args()
    print(f"DualPipeV, PP 2 x EP 2 (4 Gloo processes), DeepSeek-V3-style MoE, {args.layers} layers (the first dense) "
          f"in 4 stages, emulated device: F = "
          f"{args.f_ms:g} ms, a2a = F; overlap_moe against no overlap, {args.steps} steps each")
    for m in [int(v) for v in args.microbatches.split(",")]:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "result.pt")
            done = subprocess.run([sys.executable, CHECKS, "--emulate", str(args.f_ms), "--steps", str(args.steps),
                                   "--microbatches", str(m), "--layers", str(args.layers), "--out", out],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                print(done.stdout + done.stderr)
                sys.exit(f"-m {m}: the run failed")
            ranks = torch.load(out)
        print(f"\n-m {m} (results bit-identical with and without the overlap):")
        print(f"  {'rank':<6}{'exposed a2a on ms':>19}{'off ms':>10}{'on / off':>10}{'step on ms':>12}{'off ms':>10}")
        for r, runs in enumerate(ranks):
            (step_off, exp_off), (step_on, exp_on) = runs["off"], runs["on"]
            print(f"  {r:<6}{exp_on * 1e3:>19.1f}{exp_off * 1e3:>10.1f}{exp_on / exp_off:>10.3f}"
                  f"{step_on * 1e3:>12.1f}{step_off * 1e3:>10.1f}")
        on = sum(r["on"][1] for r in ranks)
        off = sum(r["off"][1] for r in ranks)
        step = max(r["on"][0] for r in ranks) / max(r["off"][0] for r in ranks)
        print(f"  all ranks: exposed all-to-all x{on / off:.3f} ({1 - on / off:.1%} hidden); step x{step:.3f}")


if __name__ == "__main__":
    main()
