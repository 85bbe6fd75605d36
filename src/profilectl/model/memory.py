"""Where a PyTorch job's GPU memory went, per rank and device, from torch's memory history
(formats/torch_memory.py reads the snapshot; formats/memory_history.py replays it). Frozen values, JSON-able;
nothing here imports anything above it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MemoryShare:
    """The bytes one category held at a moment (the peak, or the failure)."""
    category: str  # parameters, gradients, optimizer state, activations, other, before the history
    bytes: int
    allocations: int


@dataclass(frozen=True)
class MemoryPoint:
    """Allocated (by tensors) against reserved (by the caching allocator from the driver) at one moment."""
    at: float  # seconds since the history's first event, or the event's index where it has no times
    allocated: int
    reserved: int


@dataclass(frozen=True)
class LiveAllocation:
    """An allocation alive at the failure (or the peak): what it is for and the code that made it."""
    bytes: int
    category: str
    made_by: str  # the innermost frame outside torch's own files ("train.py:41 in forward"); "" unknown
    stack: str  # a few frames, innermost first


@dataclass(frozen=True)
class MemoryFailure:
    """The out-of-memory error: what was asked, what the device had, and what held the memory."""
    requested: int  # bytes the failed allocation asked for
    device_free: int | None  # bytes the driver still reported free
    allocated: int  # held by tensors when it failed
    reserved: int  # held by the caching allocator when it failed
    by_category: tuple[MemoryShare, ...]
    largest: tuple[LiveAllocation, ...]  # the largest alive, largest first
    requested_by: str  # the code that asked for the failed allocation ("" where the history lacks it)


@dataclass(frozen=True)
class MemoryReport:
    """One rank's device memory, replayed from torch's memory history: the peak, what held it, a downsampled series
    and any out-of-memory failure."""
    rank: str
    device: int
    source: str  # the snapshot file's name
    events: int  # allocator events in the history
    time_basis: str  # "seconds" (the events carry times) or "event" (their order only)
    peak_allocated: int  # the largest allocated in the replayed history
    peak_at: float
    reserved_at_peak: int
    peak_reserved: int
    by_category: tuple[MemoryShare, ...]  # what held the peak, largest first
    series: tuple[MemoryPoint, ...]  # downsampled: each point the largest allocated of its stretch
    torch_max_allocated: int | None = None  # torch.cuda.max_memory_allocated() at the dump (profilectl's hook)
    torch_max_reserved: int | None = None
    failure: MemoryFailure | None = None
    notes: tuple[str, ...] = ()
