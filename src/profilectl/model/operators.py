"""What a torch trace recorded with shapes says of its operators: one row per rank, operator and
signature (input shapes, dtypes, scalar arguments), with the GPU time of the kernels each call
launched. Readers make these (formats/torch_shapes.py); analysis/operator_roofline.py puts them
under the roofline. Nothing here imports anything above it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# An argument's shape as Kineto writes it: a list of ints, [] for a scalar or an absent tensor, a
# list of lists for a TensorList. Kept as nested tuples (hashable, JSON-able).
Dims = tuple[Any, ...]


@dataclass(frozen=True)
class OperatorShape:
    """Every call of one operator with one signature on one rank."""
    rank: str
    name: str  # aten::mm
    input_dims: tuple[Dims, ...]  # "Input Dims", one per argument
    input_types: tuple[str, ...]  # "Input type": c10::BFloat16, float, Scalar, "" (absent)
    concrete: tuple[str, ...]  # "Concrete Inputs": the scalars' and lists' values as text ("" for a tensor)
    calls: int
    cpu_ns: int  # the operator's own ranges on the host, summed
    gpu_ns: int  # the kernels its calls launched (by correlation id), summed
    launches: int  # those kernels, counted
    kernels: tuple[tuple[str, int], ...] = ()  # (kernel name, GPU ns), heaviest first, at most KERNELS_KEPT

    def __post_init__(self) -> None:
        # read back from JSON (a cached summary, a partial) a TensorList's shapes are lists: the
        # signature must stay hashable, as the reader made it
        object.__setattr__(self, "input_dims", _tuples(self.input_dims))


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


KERNELS_KEPT = 3
