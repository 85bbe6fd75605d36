"""torch's memory as a trace records it: the CUDA memory snapshot (torch.cuda.memory._dump_snapshot, or profilectl's start-up hook
under `trace --memory`: <host>-rank<R>-<pid>.memory.pickle, and .oom.memory.pickle at an
out-of-memory error): the caching allocator's segments and blocks at the dump, and its history of
events (alloc, free, segment alloc/free, oom), each with the Python stack that caused it.

The file is a pickle, and a pickle can run code: it is read by an Unpickler that builds plain values
only (dict, list, tuple, str, bytes, int, float, bool, None) and refuses every class or function a
file names (torch's snapshot holds nothing else), at most $PROFILECTL_MAX_SNAPSHOT_BYTES bytes
(default 2 GiB), through files.read_regular (never a link or a device). Then its layout is checked
(torch/cuda/memory.py `_snapshot`: segments, device_traces) and one line says what does not fit.
formats/memory_history.py replays it.

Where that is all there is: a trace recorded with profile_memory=True holds an instant event per
allocation and free, `[memory]` (args "Bytes", negative for a free, "Total Allocated", "Total
Reserved", "Device Type", "Device Id"), and `[OutOfMemory]` at a failed allocation (torch's
profiler_kineto.cpp reportMemoryUsage / reportOutOfMemory): formats/torch_memory_events.py finds them
in the trace's text as it is streamed, and formats/memory_history.py's from_profile_events turns them
into the same report, less what needs stacks.
"""

from __future__ import annotations

import io
import pickle
import re
from pathlib import Path
from typing import Any

from profilectl.errors import FormatError
from profilectl.formats.reader import Reader
from profilectl.model.tables import Tables

MAX_BYTES = 2 << 30
NAME = re.compile(r"^(?P<host>.+)-rank(?P<rank>[^-]+)-(?P<pid>\d+)\.(?P<oom>oom\.)?memory\.pickle$")
SUFFIXES = (".pickle", ".pkl")
HEAD = 4096  # a snapshot's first key, "segments", comes within its first bytes
PROTOCOL = b"\x80"  # PROTO opcode: pickle protocol 2 and later (torch dumps with the default, 4 or 5)


class _Refused(pickle.UnpicklingError):
    """What the file asked for that a snapshot never needs."""


class _PlainValues(pickle.Unpickler):
    """Builds containers and scalars only: a file that names any class or function is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise _Refused(f"it names {module}.{name}: a memory snapshot holds plain values only, so "
                                     "the file is not read (a pickle that names code can run it)")

    def persistent_load(self, pid: Any) -> Any:
        raise _Refused("it refers to an external object: not a memory snapshot")


def load(path: Path) -> dict[str, Any]:
    """The snapshot as plain values; FormatError in one line for anything else."""
    from profilectl.files import env_limit, read_regular
    data = read_regular(path, env_limit("MAX_SNAPSHOT_BYTES", MAX_BYTES), "PROFILECTL_MAX_SNAPSHOT_BYTES")
    try:
        value = _PlainValues(io.BytesIO(data)).load()
    except pickle.UnpicklingError as exc:
        if isinstance(exc, _Refused):
            raise FormatError(f"{path}: not read: {exc}") from None
        raise FormatError(f"{path}: not a complete pickle (truncated or damaged: {exc})") from None
    except (EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError, UnicodeError):
        raise FormatError(f"{path}: not a complete pickle (truncated or damaged)") from None
    except (MemoryError, RecursionError):
        raise FormatError(f"{path}: too large or too deeply nested to read here") from None
    check(value, path)
    return value


def _fail(path: Path, what: str) -> FormatError:
    return FormatError(f"{path}: not a torch memory snapshot: {what}")


def check(value: Any, path: Path) -> None:
    """torch's layout (torch/cuda/memory.py _snapshot): {"segments": [Segment], "device_traces":
    [[TraceEntry]]}; each entry a dict with an "action"; sizes and addresses integers."""
    if not isinstance(value, dict):
        raise _fail(path, f"its top level is a {type(value).__name__}, not a dict")
    segments, traces = value.get("segments"), value.get("device_traces", [])
    if not isinstance(segments, list) or not isinstance(traces, list):
        raise _fail(path, "no list of segments and device_traces")
    for segment in segments:
        if not isinstance(segment, dict) or not isinstance(segment.get("total_size"), int) \
                or not isinstance(segment.get("blocks", []), list):
            raise _fail(path, "a segment without an integer total_size and a list of blocks")
        for block in segment.get("blocks", []):
            if not isinstance(block, dict) or not isinstance(block.get("size"), int):
                raise _fail(path, "a block without an integer size")
    for trace in traces:
        if not isinstance(trace, list):
            raise _fail(path, "a device trace that is not a list")
        for entry in trace:
            if not isinstance(entry, dict) or not isinstance(entry.get("action"), str) \
                    or not isinstance(entry.get("size", 0), int):
                raise _fail(path, "a trace entry without an action and an integer size")


def recognised(path: Path) -> bool:
    """profilectl's own snapshot names, or a .pickle whose first key is torch's "segments"."""
    if NAME.match(path.name):
        return True
    if not path.name.endswith(SUFFIXES) or not path.is_file():
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(HEAD)
    except OSError:
        return False
    return head.startswith(PROTOCOL) and b"segments" in head and b"device_traces" in head or (
        head.startswith(PROTOCOL) and b"segments" in head and b"blocks" in head)


def read(path: Path) -> Tables:
    from profilectl.formats.memory_history import analyse
    match = NAME.match(path.name)
    snapshot = load(path)
    rank = match.group("rank") if match else "0"
    reports = analyse(snapshot, rank=rank, source=path.name)
    return Tables(memory=reports)


class TorchMemoryReader(Reader):
    kind = "torch-memory-snapshot"

    def recognises(self, path: Path) -> bool:
        return recognised(path)

    def read_file(self, path: Path) -> Tables:
        return read(path)
