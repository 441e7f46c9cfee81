# Type stubs of the extension dualpipe._core (src/python/). The fields of Schedule, Simulation and Plan are those
# of `dualpipe schedule|simulate|plan --format json`; to_dict() gives them all, in the json's order.
import os
from typing import Any, Sequence

import numpy

__version__: str  # the project's (CMakeLists.txt)

class Costs:
    """Per-action costs and the memory model, named as the command line's --cost keys."""

    def __init__(
        self,
        *,
        F: float | Sequence[float] | None = ...,
        B: float | Sequence[float] | None = ...,
        W: float | Sequence[float] | None = ...,
        FB: float | None = ...,
        comm: float | None = ...,
        a2a: float | None = ...,
        a2a_latency: float | None = ...,
        layers: int | None = ...,
        pair: str | None = ...,
        unshard: float | None = ...,
        reduce: float | None = ...,
        scale: Sequence[float] | None = ...,
        act_bytes: float | None = ...,
        act_scale: Sequence[float] | None = ...,
        w_mem: float | None = ...,
        recompute: bool | None = ...,
        input_mem: float | None = ...,
    ) -> None: ...
    @staticmethod
    def parse(text: str) -> Costs: ...
    @staticmethod
    def from_kineto(path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
                    forward: str = r"^forward$|\(F\)$", backward: str = r"^backward$|\(B\)$",
                    backward_input: str = r"^backward_input$|\(I\)$", weight: str = r"^weight$|\(W\)$",
                    overlapped: str = r"^(forward_backward|1F1B|overlapped_forward_backward)$",
                    comm: str = r"^p2p$", update: str = r"^update$", ranks: int = 0,
                    with_sources: bool = False) -> Any: ...
    def to_dict(self) -> dict[str, Any]: ...
    # json fields: F, B, W (a number, or one per stage), FB, comm, a2a, a2a_latency, layers, pair, unshard, reduce,
    # scale, act_bytes, act_scale, w_mem, recompute, input_mem
    F: float | list[float]
    B: float | list[float]
    W: float | list[float]
    FB: float
    comm: float
    a2a: float
    a2a_latency: float
    layers: int
    pair: str
    unshard: float
    reduce: float
    scale: list[float] | None
    act_bytes: float | None
    act_scale: list[float] | None
    w_mem: float
    recompute: bool
    input_mem: float

class Schedule:
    kind: str
    ranks: int
    stages: int
    microbatches: int
    placement: dict[str, Any]
    actions: list[list[str]]
    def to_dict(self) -> dict[str, Any]: ...
    @staticmethod
    def from_text(text: str) -> Schedule: ...
    def to_text(self) -> str: ...
    def to_csv(self) -> str: ...
    def to_pytorch_csv(self) -> str: ...
    def to_pytorch(self) -> dict[int, list[Any]]: ...
    def lower(self) -> Schedule: ...
    def draw(self, path: str, costs: Costs = ...) -> None: ...
    def __len__(self) -> int: ...

class _SimulationFields:
    # Stub only (not a runtime class): the fields Simulation and Plan both have (`simulate --format json`)
    kind: str
    ranks: int
    stages: int
    microbatches: int
    costs: dict[str, Any]
    costs_text: str
    makespan: float
    bubble: float
    bubble_rate: float
    step_bubble_rate: float
    peak_activations: float
    per_rank: list[dict[str, Any]]

class RankMetrics:
    """One rank's figures of a simulated step (times in cost units)."""

    rank: int
    busy: float
    idle: float
    span: float
    peak_activations: float
    peak_activation_fraction: float
    peak_activation_bytes: float
    stages_held: int
    parameter_copies: float

class Metrics:
    """A simulated step's figures, bound from the simulator's struct (times in cost units)."""

    makespan: float
    bubble: float
    bubble_rate: float
    step_bubble_rate: float
    per_rank: list[RankMetrics]
    peak_activations: float

class Simulation(_SimulationFields):
    @property
    def schedule(self) -> Schedule: ...
    @property
    def cost_model(self) -> Costs: ...
    @property
    def metrics(self) -> Metrics: ...
    @property
    def timeline(self) -> list[numpy.ndarray]: ...  # per rank, float64 (actions, 2): start, end
    @property
    def times(self) -> list[list[tuple[str, float, float]]]: ...
    def to_dict(self) -> dict[str, Any]: ...
    def to_text(self) -> str: ...
    def to_csv(self) -> str: ...
    def draw(self, path: str) -> None: ...

class Plan(_SimulationFields):
    # a Simulation's fields (of the chosen schedule, its kind the plan's name), then the plan's own
    objective: str
    objective_value: float
    memory_limit: float | None
    peak_activations_per_slice: float
    parameter_copies: float
    minimum_memory: float
    layers_per_stage: str  # with layer_costs: the cut of the layers into the chosen schedule's stages
    actions: list[list[str]]
    @property
    def schedule(self) -> Schedule: ...
    @property
    def cost_model(self) -> Costs: ...
    def to_dict(self) -> dict[str, Any]: ...
    def to_text(self) -> str: ...
    def to_csv(self) -> str: ...
    def draw(self, path: str) -> None: ...
    @property
    def candidates(self) -> list[dict[str, Any]]: ...
    @property
    def evaluated(self) -> int: ...

def schedule(kind: str, ranks: int, microbatches: int, *, stages_per_rank: int = 0,
             max_memory: int | str | None = None) -> Schedule: ...
def read_schedule(path: str) -> Schedule: ...
def simulate(schedule: Schedule, costs: Costs = ...) -> Simulation: ...
def plan(ranks: int, microbatches: int, costs: Costs = ..., *, memory_limit: float | str | None = None,
         objective: str = "makespan", placements: Sequence[str] = ..., families_only: bool = False,
         max_memory: int | str | None = None,
         layer_costs: str | Sequence[tuple[float, float, float, float]] | None = None) -> Plan: ...
def kinds() -> list[tuple[str, str, str]]: ...
