"""`dualpipe.pytorch.ScheduleDualPipeV`: torch.distributed.pipelining's schedule class of that name, on dualpipe's
executor. It takes PyTorch's own `PipelineStage` objects and loss function and keeps the `step(...)` contract of
PyTorch's schedules, so torchtitan-style code changes one import (docs/from-pytorch.md):

    from dualpipe.pytorch import ScheduleDualPipeV    # was: from torch.distributed.pipelining import ...
    schedule = ScheduleDualPipeV([stage_r, stage_2R_1_r], n_microbatches, loss_fn=loss_fn)
    schedule.step(x, target=y, losses=losses)         # rank 0: inputs and targets; other ranks: schedule.step()

What runs is `dualpipe.DualPipeV` over the stages' modules and process group, with its overlapped pairs, its weight
gradients deferred to W actions and its named errors. Gradients are divided by n_microbatches after the step when
scale_grads (PyTorch's default), as PyTorch does.
"""
from typing import Any, Callable, List, Optional

import torch

from .deepseek import DualPipeV

__all__ = ["ScheduleDualPipeV"]


class ScheduleDualPipeV:
    """DualPipeV over two PipelineStages per rank: stage r and stage 2R-1-r of 2R, R the size of their group."""

    def __init__(self, stages: List[Any], n_microbatches: int, loss_fn: Optional[Callable] = None,
                 args_chunk_spec=None, kwargs_chunk_spec=None, output_merge_spec=None, scale_grads: bool = True,
                 timeout: float = 300.0, defer_weight_grads: bool = True) -> None:
        stages = list(stages)
        if len(stages) != 2:
            raise ValueError(f"ScheduleDualPipeV takes 2 PipelineStages per rank (stages r and 2R-1-r), got "
                             f"{len(stages)}")
        for name, spec in (("args_chunk_spec", args_chunk_spec), ("kwargs_chunk_spec", kwargs_chunk_spec),
                           ("output_merge_spec", output_merge_spec)):
            if spec is not None:
                raise ValueError(f"ScheduleDualPipeV: {name}={spec!r} is not supported: inputs, targets and outputs "
                                 "are split and joined along dimension 0 (leave it None)")
        group, ranks, rank = stages[0].group, stages[0].group_size, stages[0].group_rank
        if stages[1].group is not group:
            raise ValueError("ScheduleDualPipeV: the two stages belong to different process groups; both stages of a "
                             "rank run on the pipeline's one group")
        num_stages = stages[0].num_stages
        if num_stages != 2 * ranks:
            raise ValueError(f"ScheduleDualPipeV: num_stages={num_stages} on a group of {ranks} ranks; DualPipeV "
                             f"cuts the model into 2R = {2 * ranks} stages")
        indices = sorted(s.stage_index for s in stages)
        expected = [rank, 2 * ranks - 1 - rank]
        if indices != expected:
            raise ValueError(f"ScheduleDualPipeV: stages {indices} on group rank {rank}; DualPipeV places stages r "
                             f"and 2R-1-r, here {expected}, on rank r")
        if not isinstance(n_microbatches, int) or n_microbatches < num_stages:
            raise ValueError(f"DualPipeV requires at least as many microbatches as stages, but got {n_microbatches} "
                             f"microbatches and {num_stages} stages.")
        self._stages = sorted(stages, key=lambda s: s.stage_index != rank)  # stage r first
        self._n_microbatches = n_microbatches
        self._loss_fn = loss_fn
        self.scale_grads = bool(scale_grads)
        self.rank = rank
        self.pipe = DualPipeV([s.submod for s in self._stages], process_group=group, timeout=timeout,
                              defer_weight_grads=defer_weight_grads)

    def _criterion(self, *outputs_and_target):
        *outputs, target = outputs_and_target
        return self._loss_fn(outputs[0] if len(outputs) == 1 else tuple(outputs), target)

    def step(self, *args, target=None, losses: Optional[list] = None, return_outputs: bool = True, **kwargs):
        """One training step over the whole batch, as PyTorch's schedules' step(): rank 0 (stage 0 and the last
        stage) passes the inputs and the target; `losses` gets the micro-batches' losses there, and the last stage's
        outputs joined along dimension 0 are returned when return_outputs (None elsewhere)."""
        if self._loss_fn is not None and not torch.is_grad_enabled():
            raise RuntimeError("step() requires gradients to be enabled for backward computation; it should not be "
                               "used under torch.no_grad() context. Please call eval() instead.")
        return self._run(args, kwargs, target, losses, return_outputs, training=self._loss_fn is not None)

    def eval(self, *args, target=None, losses: Optional[list] = None, **kwargs):
        """Forward only (PyTorch's eval()): the losses when a target and loss_fn are given."""
        with torch.no_grad():
            return self._run(args, kwargs, target, losses, True, training=False)

    def _run(self, args, kwargs, target, losses, return_outputs, training):
        if kwargs:
            raise ValueError(f"ScheduleDualPipeV.step: keyword inputs {sorted(kwargs)} are not supported; pass the "
                             "first stage's inputs positionally")
        if losses is not None and not isinstance(losses, list):
            raise TypeError(f"losses must be a list but got a {type(losses)}")
        first = self.rank == 0
        if first and not args:
            raise ValueError("ScheduleDualPipeV.step: rank 0 holds stage 0 and takes the batch's inputs")
        criterion = self._criterion if first and self._loss_fn is not None and target is not None else None
        if first and training and criterion is None:
            raise ValueError("ScheduleDualPipeV.step: rank 0 holds the last stage and computes the loss: pass "
                             "target=")
        loss, outputs = self.pipe.step(*(args if first else ()), num_chunks=self._n_microbatches,
                                       criterion=criterion, labels=(target,) if criterion else (),
                                       return_outputs=return_outputs and first)
        if training and self.scale_grads:
            for stage in self._stages:
                for p in stage.submod.parameters():
                    if p.grad is not None:
                        p.grad.div_(self._n_microbatches)
        if first and losses is not None and loss is not None:
            losses.clear()
            losses.extend(loss.unbind(0))
        return outputs if first and return_outputs else None
