"""The worker processes that decode a Chrome trace's chunks side by side: how many (workers_for),
the pool (forked where the system can), the shared ring through which a gzip trace's inflated
chunks reach them without pickling (Ring, slot_bytes), and the pause of the cyclic garbage
collector while millions of small objects are built (gc_paused).
"""

from __future__ import annotations

import contextlib
import gc
import os
from typing import TYPE_CHECKING, Any, Iterator

from profilectl import settings

if TYPE_CHECKING:
    import mmap
    from concurrent.futures import Executor

    from profilectl.formats.chrome_io import Task

PARALLEL_MIN_BYTES = 48 << 20  # below this, worker start-up costs more than it saves


class Ring:
    """The slots of a gzip trace's inflated chunks, shared with the worker processes: one anonymous
    shared mapping made before the pool forks (the workers inherit it: pool(); no name, nothing left
    behind if a process is killed). The parent writes `[` + chunk + `]` into the next slot and the worker
    decodes it in place: no pickling through the pool's pipe, no fresh pages per chunk (sending 4 MB
    chunks as bytes cost the parent 0.6 s and the workers 3-5 s of CPU in page faults and copies for
    805 MB of JSON). A slot is written again only once the chunk before in it was decoded: `slots`
    must exceed the chunks in flight (read_trace's in_workers waits for the oldest beyond `ahead`)."""

    def __init__(self, slots: int, slot_size: int) -> None:
        import mmap
        self.slots, self.slot_size, self.turn = slots, slot_size, 0
        self.memory = mmap.mmap(-1, slots * slot_size)

    def next_slot(self) -> int:
        """The offset of the slot of the next task (every task takes its turn, in a slot or not)."""
        offset = self.turn * self.slot_size
        self.turn = (self.turn + 1) % self.slots
        return offset


_RING: list[Any] = []  # in a worker: the ring of the pool it belongs to (pool's initializer)


def slot_bytes(task: Task) -> memoryview:
    """`[` + the chunk + `]` where the parent wrote it, in place."""
    if not _RING:
        raise RuntimeError("a chunk in a shared ring, read by a process that has none")
    return memoryview(_RING[0])[task.slot:task.slot + task.end - task.start + 2]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Decoding builds millions of short-lived objects: the cyclic collector would rescan them over
    and over (the stdlib decoder runs 2.4x slower with it)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def workers_for(size: int) -> int:
    if size < PARALLEL_MIN_BYTES or settings.get_bool("PROFILECTL_NO_PARALLEL"):
        return 1
    return max(1, min(os.cpu_count() or 1, 8))


def forks() -> bool:
    """Whether pool() forks its workers (they inherit what the parent mapped before)."""
    import multiprocessing
    return "fork" in multiprocessing.get_all_start_methods()


def pool(workers: int, ring: mmap.mmap | None = None) -> Executor:
    """Worker processes, forked where the system can; with `ring`, a shared mapping they inherit
    (the initializer's arguments are not pickled under fork) and read chunks from (slot_bytes)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    context = multiprocessing.get_context("fork" if forks() else None)
    if ring is None:
        return ProcessPoolExecutor(max_workers=workers, mp_context=context)
    if context.get_start_method() != "fork":
        raise ValueError("a shared ring needs forked workers")
    return ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_attach_ring, initargs=(ring,))


def _attach_ring(memory: mmap.mmap) -> None:
    _RING[:] = [memory]
