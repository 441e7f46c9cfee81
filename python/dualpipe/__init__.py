"""dualpipe from Python: DualPipe and the schedules it is compared with, their simulation, the memory-limited
planner, and their export to PyTorch's own pipelining runtime. docs/python.md.

    >>> import dualpipe
    >>> dualpipe.plan(8, 32, dualpipe.Costs(F=1, B=2, W=1)).makespan
    >>> s = dualpipe.schedule("dualpipev", 4, 8)
    >>> dualpipe.simulate(s, dualpipe.Costs(F=1, B=2, W=1)).bubble_rate
    >>> s.draw("dualpipev.svg"); s.to_pytorch()   # {rank: [torch.distributed.pipelining actions]}

DeepSeek's API on our runtime (docs/python.md): dualpipe.DualPipe((stage_r, stage_mirror)).step(x, num_chunks=20, ...);
dualpipe.overlap_moe(stage) gives a stage with MoE layers DeepSeek's forward-backward overlap, no phase list needed.

Schedule, Simulation and Plan are bound from the library's structs (actions as dualpipe.Action, figures as
dualpipe.Metrics, the timeline as numpy arrays); `to_dict()` gives the json of `dualpipe schedule|simulate|plan
--format json`. Bad input raises ValueError naming the value and the rule.
"""
from ._core import (Action, Costs, Metrics, Placement, Plan, PlanCandidate, RankMetrics, Schedule, Simulation,
                    __version__, kinds, plan, read_schedule, schedule, simulate)

__all__ = ["Action", "Costs", "DualPipe", "DualPipeV", "Metrics", "Placement", "Plan", "PlanCandidate", "RankMetrics",
           "Schedule", "Simulation", "kinds", "overlap_moe", "plan", "read_schedule", "schedule", "set_p2p_tensor_dtype",
           "set_p2p_tensor_shapes", "simulate"]


def __getattr__(name):
    # DualPipe, DualPipeV and their set_p2p_* need PyTorch; the planner does not, so they are imported on first use.
    if name in ("DualPipe", "DualPipeV", "set_p2p_tensor_dtype", "set_p2p_tensor_shapes"):
        from . import deepseek
        return getattr(deepseek, name)
    if name == "overlap_moe":
        from .moe_overlap import overlap_moe
        return overlap_moe
    raise AttributeError(f"module 'dualpipe' has no attribute {name!r}")
