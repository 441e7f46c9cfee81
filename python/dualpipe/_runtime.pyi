# dualpipe._runtime: the C++ executor on Python modules, internal to dualpipe.DualPipe and dualpipe.DualPipeV.
from typing import Callable, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist

def nccl_compiled_in() -> bool: ...

class ChannelSpec:
    def __init__(self, store: Optional[dist.Store] = None, prefix: str = "", nccl: bool = False) -> None: ...

class MonitorSpec:
    def __init__(self, store: Optional[dist.Store] = None, prefix: str = "", master_addr: str = "") -> None: ...

class Pipeline:
    def __init__(self, kind: str, num_microbatches: int, modules: Dict[int, torch.nn.Module],
                 hook: Optional[Callable[..., object]], group: dist.ProcessGroup, rank_mapping: List[int],
                 timeout_s: float, shapes: List[Tuple[int, ...]], dtype: torch.dtype,
                 device: torch.device, channels: ChannelSpec, monitor: MonitorSpec, weight_store: Optional[type],
                 record_actions: bool, stall_report_after_s: float, stall_report_dir: str) -> None: ...
    def step(self, inputs: List[Tuple[torch.Tensor, ...]], labels: List[Tuple[torch.Tensor, ...]],
             criterion: Optional[Callable[..., torch.Tensor]], return_outputs: bool, interruptible: bool
             ) -> Tuple[List[torch.Tensor], List[List[torch.Tensor]]]: ...
    def last_step_actions(self) -> List[Tuple[str, float, float]]: ...
    @property
    def entering_microbatches(self) -> List[int]: ...
    @property
    def loss_microbatches(self) -> List[int]: ...
