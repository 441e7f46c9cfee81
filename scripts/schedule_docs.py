#!/usr/bin/env python3
"""Regenerates the per-schedule part of docs/schedules.md from the real `dualpipe` command.

    python3 scripts/schedule_docs.py [build/dualpipe]

Everything above the marker comment in docs/schedules.md is rewritten: for each schedule, its rule, the
text timeline of a small case (`dualpipe schedule`) and the simulated bubble and peak activations
(`dualpipe simulate`) next to the published formula.
"""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "schedules.md"
MARKER = "<!-- Per-schedule sections go above this line"
BIN = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "build" / "dualpipe")
R, M = 4, 8
COSTS = ["F=1,B=2,W=1,FB=3", "F=2,B=3,W=1,FB=4", "F=1,B=3,W=1,FB=4"]


def run(*args):
    return subprocess.run([BIN, *args], check=True, capture_output=True, text=True).stdout


def simulate(kind, costs):
    return json.loads(run("simulate", "-k", kind, "-r", str(R), "-m", str(M), "-c", costs, "-f", "json"))


def costs_of(spec):
    return {k: float(v) for k, v in (item.split("=") for item in spec.split(","))}


# (kind, title, rule, published bubble as a function of (S, c), condition, published peak as a function of S)
SCHEDULES = [
    ("gpipe", "GPipe", "All M forwards, then all M full backwards (Huang et al. 2019).",
     "(S-1)(F+B)", lambda S, c: (S - 1) * (c["F"] + c["B"]), "any costs", "M", lambda S: M),
    ("1f1b", "1F1B", "Rank r runs min(R-r-1, M) warm-up forwards, then one forward and one backward in turn, "
     "then the remaining backwards (DAPPLE, Megatron-LM).",
     "(S-1)(F+B)", lambda S, c: (S - 1) * (c["F"] + c["B"]), "any costs", "S (M >= S)", lambda S: S),
    ("interleaved-1f1b", "Interleaved 1F1B", "Megatron-LM's interleaved schedule: v = 2 stages per rank "
     "(stage s on rank s mod R), micro-batch groups of R; M must be a multiple of R.",
     "(R-1)(F+B) for per-stage costs", lambda S, c: (R - 1) * (c["F"] + c["B"]), "any costs", "", None),
    ("combined-1f1b", "Combined 1F1B", "Megatron-Core's MoE all-to-all overlap (`--overlap-moe-expert-parallel-comm`): "
     "interleaved 1F1B's walk with one more warm-up forward, each steady forward and backward run as one overlapped "
     "F&B pair (layer by layer on two streams in Megatron, phase by phase here), then the remaining backwards. v = 2 "
     "stages per rank (Megatron requires virtual stages for PP > 1; one rank runs its no-pipelining path, F0, "
     "(F i;B i-1), B M-1); M must be a multiple of R.",
     "", None, "", "as interleaved 1F1B (the extra warm-up forward takes the place of its steady one)", None),
    ("zb-h1", "ZB-H1", "Zero Bubble (Qi et al. 2024): backward split into I and W; stage i emits "
     "F_x, I_{x-(S-1-i)}, W_{x-(S-1)} for x = 0, 1, ...; 1F1B's memory.",
     "(S-1)(F+B-2W)", lambda S, c: (S - 1) * (c["F"] + c["B"] - 2 * c["W"]), "exact when W <= F and W <= I",
     "S", lambda S: S),
    ("zb-h2", "ZB-H2", "As ZB-H1 with twice the lag (k = 2): more warm-up forwards, so W work fills the drain; "
     "about twice the activations.",
     "bubble rate 0 when F = I = W", None, "", "2S-1", lambda S: 2 * S - 1),
    ("zbv", "ZBV", "Zero Bubble V: two stages per rank in a V (rank r holds stages r and 2R-1-r), PyTorch's "
     "handcrafted order (ScheduleZBVZeroBubble); needs M >= 2R-1.",
     "bubble rate 0 when F = I = W", None, "", "2R (the whole model's activations, as 1F1B)", lambda S: S),
    ("chimera", "Chimera", "Two 1F1B pipelines in opposite directions (Li and Hoefler 2021), DualPipe's placement, "
     "merged on each rank by the paper's slots; the next basic unit's forwards fill the previous unit's drain. "
     "Needs R even and M a multiple of R.",
     "(S/2-1)(F+B) when F = B (the paper's D-2 slots)", None,
     "when F = B; in general the simulated bubble is (S-2)max(F,B), the best any order reaches for R=4, M=4 "
     "(exhaustive search)", "between S/2+1 and S", None),
    ("dualpipe", "DualPipe", "DeepSeek-V3's bidirectional schedule, DeepSeek's reference order to the action: micro-batches "
     "0..M/2-1 enter at rank 0, M/2..M-1 at rank R-1; overlapped F&B pairs in the steady state; W fills the "
     "bubbles. Needs R even, M even, M >= 2R.",
     "(S/2-1)(FB+B-3W)", lambda S, c: (S / 2 - 1) * (c["FB"] + c["B"] - 3 * c["W"]),
     "exact when W = B-F, W <= F and B <= FB <= F+B; an upper bound when W < B-F (see below)", "S+1",
     lambda S: S + 1),
    ("dualpipev", "DualPipeV", "DualPipe folded into a V on R ranks (S = 2R): rank r holds stages r and 2R-1-r, "
     "every micro-batch enters and leaves at rank 0. Needs M >= 2R.",
     "(S/2-1)(FB+B-3W)", lambda S, c: (S / 2 - 1) * (c["FB"] + c["B"] - 3 * c["W"]), "as DualPipe", "S+1",
     lambda S: S + 1),
]


def section(kind, title, rule, formula, bubble_of, condition, peak_formula, peak_of):
    lines = [f"## {title} (`{kind}`)", "", rule, "", f"`dualpipe schedule --kind {kind} --ranks {R} "
             f"--microbatches {M}`:", "", "```", run("schedule", "-k", kind, "-r", str(R), "-m", str(M)).rstrip(),
             "```", ""]
    lines += ["| costs | S | makespan | bubble | published bubble | bubble rate | peak activations | published peak |",
              "|---|---|---|---|---|---|---|---|"]
    for spec in COSTS:
        j = simulate(kind, spec)
        c = costs_of(spec)
        S = j["stages"]
        published = f"{bubble_of(S, c):g} = {formula}" if bubble_of else (formula or "-")
        peak = f"{peak_of(S)} = {peak_formula}" if peak_of else (peak_formula or "-")
        lines.append(f"| {spec} | {S} | {j['makespan']:g} | {j['bubble']:g} | {published} | "
                     f"{j['bubble_rate']:.4f} | {j['peak_activations']} | {peak} |")
    if condition:
        lines += ["", f"Published bubble formula holds: {condition}."]
    return "\n".join(lines) + "\n"


def main():
    head = [
        "# Schedules",
        "",
        "Every schedule `dualpipe` generates, with the per-rank order of a small case and its simulated figures "
        "next to the published ones. Regenerate this part with `python3 scripts/schedule_docs.py` (it runs the "
        "real command). Definitions (see \"Metrics\" below): *bubble* = the largest idle time of any rank, "
        "*bubble rate* = (max span - max busy) / max span, *peak activations* in stage activations on the worst "
        "rank. Costs are per stage: F forward, B full backward, W its weight part (I = B - W), FB an overlapped "
        "F&B pair.",
        "",
        "Notes from the tests (`tests/sim/test_simulate_table.cpp`):",
        "",
        "- DualPipe's (S/2-1)(FB+B-3W) is exact when W = B-F *and* W <= F *and* B <= FB <= F+B; it is an upper "
        "bound when I >= F, W <= I and B <= FB <= F+B. Outside that it can be exceeded (F=1, B=3, W=2, FB=4, "
        "R=4: bubble 2 against a formula of 1), so the spec's \"exactly when W = B-F\" needs those extra "
        "conditions.",
        "- ZB-H1's (S-1)(F+B-2W) is exact when W <= F and W <= I; otherwise it is a lower bound.",
        "- \"Zero bubble\" for ZB-H2 and ZBV means a bubble rate of 0 (every rank busy from its first to its last "
        "action). The largest idle time is not 0: later ranks start later, by (R-1)F for ZBV.",
        "- 1F1B and ZB-H1 hold S activations when M >= S (M otherwise).",
        "",
    ]
    body = "\n".join(section(*s) for s in SCHEDULES)
    text = DOC.read_text()
    tail = text[text.index(MARKER):]
    DOC.write_text("\n".join(head) + "\n" + body + "\n" + tail)


if __name__ == "__main__":
    main()
