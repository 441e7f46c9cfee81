# Type stubs of the extension dualpipe._core (src/python/). Schedule, Simulation and Plan are bound from the
# library's structs; to_dict() gives the json of `dualpipe schedule|simulate|plan --format json`.
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
        I: float | Sequence[float] | None = ...,
        FB: float | None = ...,
        comm: float | None = ...,
        gap: float | None = ...,
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
    # json fields: F, B, W, I (a number, or one per stage; I None: B - W), FB, comm, gap, a2a, a2a_latency, layers,
    # pair, unshard, reduce, scale, act_bytes, act_scale, w_mem, recompute, input_mem
    F: float | list[float]
    B: float | list[float]
    W: float | list[float]
    I: float | list[float] | None
    FB: float
    comm: float
    gap: float
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

class Action:
    """One step of a rank's schedule; str() is its text form ('0F1', '(0F3;3B5)', '1SEND_F0', '3REDUCE_GRAD')."""

    @property
    def type(self) -> str: ...  # F, B, I, W, OVERLAP_F_B, SEND_F, RECV_F, SEND_B, RECV_B, UNSHARD, RESHARD, REDUCE_GRAD
    @property
    def stage(self) -> int: ...
    @property
    def microbatch(self) -> int | None: ...
    @property
    def backward_stage(self) -> int | None: ...
    @property
    def backward_microbatch(self) -> int | None: ...
    @property
    def peer(self) -> int | None: ...
    @property
    def is_compute(self) -> bool: ...

class Placement:
    """Where the stages live: one replica, or two (DualPipe, Chimera)."""

    @property
    def replicas(self) -> int: ...
    @property
    def rank_of_stage(self) -> list[list[int]]: ...  # per replica
    @property
    def replica_of_microbatch(self) -> list[int] | None: ...
    def rank(self, stage: int, microbatch: int) -> int: ...

class Schedule:
    @property
    def kind(self) -> str: ...
    @property
    def ranks(self) -> int: ...
    @property
    def stages(self) -> int: ...
    @property
    def microbatches(self) -> int: ...
    @property
    def placement(self) -> Placement: ...
    @property
    def actions(self) -> list[list[Action]]: ...
    def to_dict(self) -> dict[str, Any]: ...  # `dualpipe schedule --format json`
    @staticmethod
    def from_text(text: str) -> Schedule: ...
    def to_text(self) -> str: ...
    def to_csv(self) -> str: ...
    def to_pytorch_csv(self) -> str: ...
    def to_pytorch(self) -> dict[int, list[Any]]: ...
    def lower(self) -> Schedule: ...
    def draw(self, path: str, costs: Costs = ...) -> None: ...
    def __len__(self) -> int: ...

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

class _Simulated:
    # Stub only (not a runtime class): what Simulation, PlanCandidate and Plan all have, from the simulator's
    # structs (the fields of `simulate --format json`)
    @property
    def kind(self) -> str: ...
    @property
    def ranks(self) -> int: ...
    @property
    def stages(self) -> int: ...
    @property
    def microbatches(self) -> int: ...
    @property
    def costs(self) -> Costs: ...
    @property
    def costs_text(self) -> str: ...
    @property
    def metrics(self) -> Metrics: ...
    @property
    def makespan(self) -> float: ...
    @property
    def bubble(self) -> float: ...
    @property
    def bubble_rate(self) -> float: ...
    @property
    def step_bubble_rate(self) -> float: ...
    @property
    def peak_activations(self) -> float: ...
    @property
    def per_rank(self) -> list[RankMetrics]: ...
    @property
    def schedule(self) -> Schedule: ...

class Simulation(_Simulated):
    @property
    def timeline(self) -> list[numpy.ndarray]: ...  # per rank, float64 (actions, 2): start, end
    @property
    def times(self) -> list[list[tuple[str, float, float]]]: ...
    def to_dict(self) -> dict[str, Any]: ...  # `dualpipe simulate --format json`
    def to_text(self) -> str: ...
    def to_csv(self) -> str: ...
    def draw(self, path: str) -> None: ...

class _Weighed(_Simulated):
    # Stub only: what a plan's candidate and the plan say of a schedule the planner weighed
    @property
    def objective_value(self) -> float: ...
    @property
    def peak_activations_per_slice(self) -> float: ...
    @property
    def parameter_copies(self) -> float: ...
    @property
    def layers_per_stage(self) -> list[int] | None: ...  # with layer_costs: the layers of each stage

class PlanCandidate(_Weighed):
    """The best schedule of one kind the planner weighed (a row of `dualpipe plan`'s table)."""

    @property
    def name(self) -> str: ...
    @property
    def max_span(self) -> float: ...

class Plan(_Weighed):
    # the chosen candidate's fields (its kind the plan's name), then the request's and the search's
    @property
    def actions(self) -> list[list[Action]]: ...
    @property
    def objective(self) -> str: ...
    @property
    def memory_limit(self) -> float | None: ...
    @property
    def minimum_memory(self) -> float: ...
    @property
    def candidates(self) -> list[PlanCandidate]: ...
    @property
    def evaluated(self) -> int: ...
    def to_dict(self) -> dict[str, Any]: ...  # `dualpipe plan --format json`
    def to_text(self) -> str: ...
    def to_csv(self) -> str: ...
    def draw(self, path: str) -> None: ...

def schedule(kind: str, ranks: int, microbatches: int, *, stages_per_rank: int = 0,
             max_memory: int | str | None = None) -> Schedule: ...
def read_schedule(path: str) -> Schedule: ...
def simulate(schedule: Schedule, costs: Costs = ...) -> Simulation: ...
def plan(ranks: int, microbatches: int, costs: Costs = ..., *, memory_limit: float | str | None = None,
         objective: str = "makespan", placements: Sequence[str] = ..., families_only: bool = False,
         max_memory: int | str | None = None,
         layer_costs: str | Sequence[tuple[float, float, float, float]] | None = None) -> Plan: ...
def kinds() -> list[tuple[str, str, str]]: ...
def interleaved_phase_order(backward: Sequence[tuple[bool, bool]],
                            forward: Sequence[tuple[bool, bool]]) -> list[tuple[str, int]]: ...
