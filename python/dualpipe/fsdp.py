"""Stage modules wrapped in FSDP2 (`torch.distributed.fsdp.fully_shard`) under DualPipe, the way PyTorch's own
pipelining drives them (`PipelineStage.perform_reduce_grad`): during the step every backward keeps the gradients
unsharded and unreduced (the schedule splits a backward into I and W actions, which FSDP's hooks cannot follow);
after the last W, each module's gradients are reduce-scattered over its mesh once and the parameters resharded.

The mesh shards a stage over its data-parallel replicas: the ranks that hold the same stage in the other copies of
the pipeline, never ranks of the same pipeline.
"""
from typing import List, Sequence

import torch.distributed as dist
import torch.nn as nn

try:
    from torch.distributed.fsdp import FSDPModule, fully_shard
except ImportError:  # a PyTorch without FSDP2: no module can be one
    FSDPModule = ()


def sharded(modules: Sequence[nn.Module]) -> List[nn.Module]:
    return [m for m in modules if FSDPModule and isinstance(m, FSDPModule)]


def check_meshes(modules: Sequence[nn.Module], pipeline_group: dist.ProcessGroup) -> None:
    """Each FSDP module's mesh must hold no other rank of this pipeline."""
    pipeline = set(dist.get_process_group_ranks(pipeline_group))
    me = dist.get_rank()
    for i, module in enumerate(modules):
        if not (FSDPModule and isinstance(module, FSDPModule)):
            continue
        group = fully_shard.state(module)._fsdp_param_group
        if group is None:
            continue
        mesh_ranks = set(group.mesh_info.mesh.mesh.flatten().tolist())
        shared = sorted((mesh_ranks & pipeline) - {me})
        if shared:
            raise ValueError(f"module {i} is sharded (fully_shard) over ranks {sorted(mesh_ranks)}, which include "
                             f"ranks {shared} of this rank's own pipeline {sorted(pipeline)}: shard a stage over its "
                             "data-parallel replicas (the ranks holding the same stage in the other pipelines)")


def defer_reduction(modules: Sequence[nn.Module]) -> None:
    """Before a step: backwards accumulate unsharded gradients and reduce nothing."""
    for module in modules:
        module.set_is_last_backward(False)
        module.set_reshard_after_backward(False)
        module.set_requires_gradient_sync(False)


def reduce_gradients(modules: Sequence[nn.Module]) -> None:
    """After a step's last W: every module's gradients reduce-scattered over its mesh, its parameters resharded."""
    for module in modules:
        module.set_is_last_backward(True)
        module.set_reshard_after_backward(True)
        module.set_requires_gradient_sync(True)
        state = fully_shard.state(module)
        for inner in state._state_ctx.all_states:
            if inner._fsdp_param_group:
                inner._fsdp_param_group.post_backward()
        state._root_post_backward_final_callback()
