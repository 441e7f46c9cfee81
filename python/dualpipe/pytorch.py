"""Our schedules in torch.distributed.pipelining: its action objects, and loading them into its runtime.

The mapping is one to one: F is FORWARD, B FULL_BACKWARD, I BACKWARD_INPUT, W BACKWARD_WEIGHT, and an overlapped
pair (F;B) is OVERLAP_F_B holding its forward and backward halves, as PyTorch's own `_Action.from_str` builds it.
PyTorch runs every stage on one rank: a schedule that places a stage on two ranks (DualPipe, Chimera) raises
ValueError naming the stage (use DualPipeV, DualPipe's one-direction half). These are PyTorch's private classes
(`_Action`, `_PipelineScheduleRuntime`), the same ones torchtitan uses for its CSV schedules.

`ScheduleDualPipeV` is the other way round: PyTorch's PipelineStages and step() contract on our executor
(pytorch_schedule.py, docs/from-pytorch.md).
"""
from torch.distributed.pipelining.schedules import _Action, _ComputationType

_COMPUTATION = {
    "F": _ComputationType.FORWARD,
    "B": _ComputationType.FULL_BACKWARD,
    "I": _ComputationType.BACKWARD_INPUT,
    "W": _ComputationType.BACKWARD_WEIGHT,
}


def _action(kind, stage, microbatch, backward_stage, backward_microbatch):
    if kind == "OVERLAP_F_B":
        halves = (_Action(stage, _ComputationType.FORWARD, microbatch),
                  _Action(backward_stage, _ComputationType.FULL_BACKWARD, backward_microbatch))
        # PyTorch's container of sub-actions has no stage or micro-batch of its own.
        return _Action(-1, _ComputationType.OVERLAP_F_B, None, halves)
    return _Action(stage, _COMPUTATION[kind], microbatch)


def actions(schedule):
    """{rank: [_Action, ...]}: the compute actions of every rank in order (PyTorch's `pipeline_order`)."""
    return {rank: [_action(*a) for a in row] for rank, row in enumerate(schedule._pytorch_actions())}


def load(runtime, schedule):
    """Gives a `_PipelineScheduleRuntime` our schedule, as its `_load_csv` does with a CSV file: the compute
    actions, then PyTorch's own pass that adds the sends and receives."""
    runtime.pipeline_order = actions(schedule)
    runtime._prepare_schedule_with_comms(runtime.pipeline_order)


def __getattr__(name):
    # The schedule class needs dualpipe._runtime; exporting actions does not, so it is imported on first use.
    if name == "ScheduleDualPipeV":
        from .pytorch_schedule import ScheduleDualPipeV
        return ScheduleDualPipeV
    raise AttributeError(f"module 'dualpipe.pytorch' has no attribute {name!r}")
