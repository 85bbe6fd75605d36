"""The values a Chrome-trace read produces, and what each event category is for: the categories
torch/kineto write (current and legacy), their roles (a table of their own, the operator tree, a
range on the GPU, a step marker), the fields read of an event, and the ChunkSums that one chunk of a
trace yields (sums per name, each thread's CPU events for the operator tree, the timeline's arrays,
collectives, shapes, memory events). No code runs here beyond small helpers of these values: the
decoders (chrome_decode), aggregations (chrome_aggregate, chrome_columns) and the operator tree
(chrome_tree) share them.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any, NamedTuple

KERNEL = "kernel"
COPY_CATEGORIES = frozenset({"gpu_memcpy", "gpu_memset"})
API_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver"})  # HIP calls too: kineto files them so on ROCm
OPERATOR = "cpu_op"
# torch builds key_averages() from the profiler's FunctionEvents: every CPU-side kineto activity
# (torch's deviceTypeFromActivity), nested per thread. Python function events are not among them
# (torch 2.x drops them from the event list and exposes them as stacks), so they are no parent here.
TREE_CATEGORIES = frozenset({OPERATOR, "user_annotation", "cuda_runtime", "cuda_driver", "external_correlation",
                             "cpu_instant_event", "glow_runtime", "mtia_runtime", "xpu_runtime",
                             "privateuse1_runtime"})
# torch.autograd.profiler_util._filter_name: left out of the event list altogether.
UNLISTED_BY_TORCH = frozenset({"[memory]", "[OutOfMemory]", "profiler::_record_function_enter",
                               "profiler::_record_function_enter_new", "profiler::_record_function_exit",
                               "aten::is_leaf", "aten::output_nr", "aten::_version"})

Sums = list[int]  # [count, total, sum of squares, min, max] of integer nanoseconds
SumsByName = dict[str, Sums]


class Event(NamedTuple):
    """The fields read of one trace event (the stdlib path's form of the msgspec Struct)."""
    ph: Any
    cat: Any
    name: Any
    pid: Any
    tid: Any
    ts: Any
    dur: Any
    args: Any = None  # only its "correlation" is read (the link of a launch call to its kernel)



MISSING: Any = object()  # an event without "dur" (the stdlib path's stand-in for msgspec.UNSET)


@dataclass
class ThreadEvents:
    """The tree-building CPU events of one (pid, tid), in file order: integer ns, name index, and
    what the event is (`operator`: TREE_OPERATOR, TREE_ANNOTATION, or TREE_OTHER for the CPU events
    that are parents or children only)."""
    start: array = field(default_factory=lambda: array("q"))
    end: array = field(default_factory=lambda: array("q"))
    name: array = field(default_factory=lambda: array("l"))
    operator: bytearray = field(default_factory=bytearray)


@dataclass
class ChunkSums:
    """What one chunk yields: sums per name, the CPU events for the operator tree (names as indices
    into `names`), and, for the chunk that holds the end of the events array, the text after it."""
    kernels: SumsByName = field(default_factory=dict)
    copies: SumsByName = field(default_factory=dict)
    api: SumsByName = field(default_factory=dict)
    threads: dict[tuple[Any, Any], ThreadEvents] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)
    tail: str | None = None
    events: int = 0
    timeline: TimelineEvents = field(default_factory=lambda: TimelineEvents())
    untimed: int = 0  # events with a duration but no "ts": in the tables, not on the timeline
    # Events carrying a collective's args (COLLECTIVE_ARGS): (on the GPU, event name, start ns, end ns,
    # the args' values in COLLECTIVE_ARGS order), in file order
    collectives: list[tuple[bool, str, int, int, tuple[Any, ...]]] = field(default_factory=list)
    top_level: dict[str, Any] = field(default_factory=dict)  # the document's keys beside traceEvents
    shaped: "ShapedCalls" = field(default_factory=lambda: ShapedCalls())
    # profile_memory's [memory]/[OutOfMemory] events of the GPU (formats/torch_memory.py), in file order
    memory_events: list[tuple[int, int, int, int, int, bool]] = field(default_factory=list)


@dataclass
class ShapedCalls:
    """Operators recorded with shapes (formats/torch_shapes.py): their distinct signatures and
    threads, and per call, in file order, four integers (CALL_FIELDS) in one flat array: a trace
    recorded with shapes has a call per operator event, millions of them."""
    signatures: list[tuple[Any, ...]] = field(default_factory=list)
    threads: list[tuple[Any, Any]] = field(default_factory=list)  # (pid, tid)
    calls: array = field(default_factory=lambda: array("q"))

    CALL_FIELDS = ("thread", "start", "end", "signature")  # indices into threads and signatures

    def __len__(self) -> int:
        return len(self.calls) // len(self.CALL_FIELDS)

    def columns(self) -> Any:
        """The calls as an (n, 4) int64 numpy array (a view of `calls`)."""
        import numpy as np
        return np.frombuffer(self.calls, dtype=np.int64).reshape(-1, len(self.CALL_FIELDS))

    def extend(self, other: "ShapedCalls") -> None:
        """Append another chunk's calls, its threads and signatures re-indexed into ours."""
        import numpy as np
        if not len(other):
            return
        remaps = []
        for mine, theirs in ((self.threads, other.threads), (self.signatures, other.signatures)):
            known = {value: i for i, value in enumerate(mine)}
            remaps.append(np.array([known.setdefault(value, len(known)) for value in theirs], dtype=np.int64))
            mine[:] = list(known)
        calls = other.columns().copy()
        calls[:, 0], calls[:, 3] = remaps[0][calls[:, 0]], remaps[1][calls[:, 3]]
        self.calls.frombytes(calls.tobytes())


@dataclass
class TimelineEvents:
    """What the timeline analysis needs (analysis/timeline.py), in integer ns: every GPU activity
    (kernel 0, copy or memset 1) with its stream and launch correlation, every runtime/driver call
    with its correlation, and the ProfilerStep#N ranges (CPU side and, in torch 2.x, GPU side).
    ~33 bytes per GPU event: flat arrays, not objects."""
    start: array = field(default_factory=lambda: array("q"))
    end: array = field(default_factory=lambda: array("q"))
    stream: array = field(default_factory=lambda: array("l"))  # index into `streams`
    kind: bytearray = field(default_factory=bytearray)
    name: array = field(default_factory=lambda: array("l"))  # index into `names`
    correlation: array = field(default_factory=lambda: array("q"))  # -1: none
    streams: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    api_start: array = field(default_factory=lambda: array("q"))
    api_end: array = field(default_factory=lambda: array("q"))
    api_correlation: array = field(default_factory=lambda: array("q"))
    api_thread: array = field(default_factory=lambda: array("l"))  # index into `threads`: who launched it
    threads: list[tuple[Any, Any]] = field(default_factory=list)  # (pid, tid)
    markers: list[tuple[str, int, int, bool]] = field(default_factory=list)  # name, start, end, on the GPU

    def extend(self, other: "TimelineEvents") -> None:
        """Append another chunk's events (its streams and names re-indexed into ours)."""
        pairs: tuple[tuple[list[Any], list[Any], array, array], ...] = (
            (self.streams, other.streams, other.stream, self.stream), (self.names, other.names, other.name, self.name),
            (self.threads, other.threads, other.api_thread, self.api_thread))
        for mine, theirs, index, target in pairs:
            known = {value: i for i, value in enumerate(mine)}
            remap = []
            for value in theirs:
                if value not in known:
                    known[value] = len(mine)
                    mine.append(value)
                remap.append(known[value])
            target.extend(index if remap == list(range(len(remap))) else remapped(index, remap))
        self.start.extend(other.start)
        self.end.extend(other.end)
        self.kind.extend(other.kind)
        self.correlation.extend(other.correlation)
        self.api_start.extend(other.api_start)
        self.api_end.extend(other.api_end)
        self.api_correlation.extend(other.api_correlation)
        self.markers.extend(other.markers)


def remapped(index: array, remap: list[int]) -> array:
    """Indices re-numbered through `remap` (a chunk's names into the merged list), by numpy."""
    import numpy as np
    out = array(index.typecode)
    if len(index):
        width = np.dtype(index.typecode)
        out.frombytes(np.asarray(remap, dtype=width)[np.frombuffer(index, dtype=width)].tobytes())
    return out


STEP_MARKER = "ProfilerStep#"
GPU_MARKER = "gpu_user_annotation"  # torch's GPU-side copy of a range (CPU-side ones are user_annotation)
GPU_MARKERS = frozenset({GPU_MARKER, "gpu_user_Annotation"})  # the second: kineto 2021-06 to 2022-05
# torch 1.8/1.9 wrote record_function ranges with the operators (category "Operator"); the ranges
# torch itself opens are told apart by their names: profiler.step()'s ProfilerStep#N, the DataLoader
# iterator's and the optimizer's (torch/utils/data/dataloader.py `enumerate(DataLoader)#...__next__`,
# torch/optim/optimizer.py `Optimizer.step#...` and `Optimizer.zero_grad#...` of those releases). A
# user's own record_function name cannot be told from an operator's in those traces.
LEGACY_ANNOTATIONS = ("ProfilerStep#", "enumerate(DataLoader)#", "Optimizer.step#", "Optimizer.zero_grad#")
# The args torch's record_param_comms range carries and Kineto copies onto the collective's kernel
# (torch/csrc/profiler/util.h and libkineto/src/output_json.cpp: kCommsName ... kSeqNum): field name
# here, key in the trace. "Process Group ID" before torch 2.2 (HTA's ns_resolution trace), "Process
# Group Name" after; "Seq" from March 2026 (pytorch/pytorch#177148; "seq" is read too).
COLLECTIVE_ARGS = (("collective", "Collective name"), ("pg_name", "Process Group Name"),
                   ("pg_id", "Process Group ID"), ("pg_desc", "Process Group Description"), ("seq", "Seq"),
                   ("seq_lower", "seq"), ("in_nelems", "In msg nelems"), ("out_nelems", "Out msg nelems"),
                   ("group_size", "Group size"), ("dtype", "dtype"), ("group_ranks", "Process Group Ranks"))


# What each category is for: a table of its own (kernels 1, copies 2, API calls 3), the operator
# tree (4: an operator; 8: another CPU event, parent or child only), or both; 16: a range on the
# GPU (gpu_user_annotation); 32: a user annotation (record_function, ProfilerStep#N); 64: a CPU
# event that may be a ProfilerStep#N range.
ANNOTATION = "user_annotation"
ROLE = {KERNEL: 1, **{c: 2 for c in COPY_CATEGORIES}, **{c: 8 for c in TREE_CATEGORIES}}
ROLE.update({c: 3 | 8 for c in API_CATEGORIES})
ROLE[OPERATOR] = 4 | 8
ROLE[ANNOTATION] = 8 | 32 | 64
# Categories as each Kineto release writes them (libkineto/src/output_json.cpp and ActivityType,
# pytorch/kineto history): torch 1.8/1.9 wrote "Operator", "Runtime", "Kernel", "Memcpy", "Memset"
# and "User" for annotations; kineto of mid-2021 to mid-2022 (torch 1.10/1.11) wrote GPU ranges as
# "gpu_user_Annotation"; later releases the lower-case names above. Matched by a dict lookup: free.
LEGACY_CATEGORIES = {"Kernel": KERNEL, "Memcpy": "gpu_memcpy", "Memset": "gpu_memset", "Runtime": "cuda_runtime",
                     "Operator": OPERATOR, "User": "user_annotation"}
ROLE.update({old: ROLE[new] for old, new in LEGACY_CATEGORIES.items()})
ROLE["Operator"] |= 64  # torch 1.8/1.9 wrote record_function ranges (ProfilerStep#N too) as operators
# What a tree event is (ThreadEvents.operator), by role: 1 an operator, 2 an annotation, 0 other.
TREE_OTHER, TREE_OPERATOR, TREE_ANNOTATION = 0, 1, 2
TREE_KIND = [TREE_OPERATOR if role & 4 else TREE_ANNOTATION if role & 32 else TREE_OTHER for role in range(128)]
# The legacy autograd profiler's export (torch builds without Kineto, e.g. Debian's 1.13) has no
# "cat": CPU operators and CUDA kernels are told apart by their pid, and the ranges torch opens itself
# (ProfilerStep#N ...) by their names, as torch 1.8/1.9's "Operator" (role 64); a user's own
# record_function range cannot be told from an operator there (profilectl's start-up hook writes
# such a profile with categories: backends/rank_startup/sitecustomize.py).
LEGACY_ROLE = {"CPU functions": 4 | 8 | 64, "CUDA functions": 1}
# every category's role, the GPU-side ranges (16) included: the columns' and the collectives' lookup
ROLE_OF_CAT = {**ROLE, **{cat: 16 for cat in GPU_MARKERS}}
