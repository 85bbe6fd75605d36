"""What the host did in a torch.profiler trace, as columnar arrays for the idle-time diagnosis
(analysis/idle.py): built from the per-thread CPU events the Chrome-trace reader already keeps for
the operator tree (formats/chrome_events.py, ChunkSums.threads), so the reader's hot loop is untouched.

Categories: a CPU operator (`cpu_op`), a runtime or driver call (`cuda_runtime`/`cuda_driver`, HIP
calls too: their names start with cuda/cu/hip/hsa), or an annotation (`user_annotation`: the
ProfilerStep#N ranges, DataLoader iteration, Optimizer.step, dynamo/Inductor compile phases,
gloo collectives). torch 2.x's `python_function` events are not in that list (they are not in
torch's event tree either), so Python functions are not named here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from profilectl.model.timeline import HostActivity
    from profilectl.formats.chrome_events import ChunkSums

RUNTIME_PREFIXES = ("cuda", "cu", "hip", "hsa")


def host_activity(partial: "ChunkSums") -> "HostActivity | None":
    import numpy as np

    from profilectl.model.timeline import HOST_ANNOTATION, HOST_OPERATOR, HOST_RUNTIME, HostActivity
    from profilectl.formats.chrome_events import TREE_OPERATOR
    if not partial.threads:
        return None
    runtime = np.array([name.startswith(RUNTIME_PREFIXES) for name in partial.names] or [False], dtype=bool)
    starts, ends, names, categories, threads = [], [], [], [], []
    for index, (_key, events) in enumerate(partial.threads.items()):
        if not len(events.start):
            continue
        name = np.frombuffer(events.name, dtype=np.int64 if events.name.itemsize == 8 else np.int32).astype(np.int64)
        operator = np.frombuffer(bytes(events.operator), dtype=np.uint8) == TREE_OPERATOR
        category = np.where(operator, HOST_OPERATOR, np.where(runtime[name], HOST_RUNTIME, HOST_ANNOTATION))
        starts.append(np.frombuffer(events.start, dtype=np.int64))
        ends.append(np.frombuffer(events.end, dtype=np.int64))
        names.append(name)
        categories.append(category.astype(np.int8))
        threads.append(np.full(len(name), index, dtype=np.int64))
    if not starts:
        return None
    return HostActivity(start=np.concatenate(starts), end=np.concatenate(ends), category=np.concatenate(categories),
                        name=np.concatenate(names), thread=np.concatenate(threads), names=tuple(partial.names),
                        threads=tuple(f"{pid}:{tid}" for pid, tid in partial.threads))
