"""rocpd databases built the way rocprofv3 builds them, for tests, doubles and the benchmark.

The schema is AMD's own SQL (tests/fixtures/rocpd-schema/<version>/, provenance in its README),
with the placeholders substituted as rocprofiler-sdk's rocpd_sql_load_schema does: `{{uuid}}`
becomes "_" + the session's uuid with "-" turned into "_" (so every table is `rocpd_<name>_<uuid>`
and `rocpd_<name>` is a VIEW over it: no rowid), `{{guid}}` the uuid itself. Rows are written as
rocprofiler-sdk's writer (source/lib/output/generateRocpd.cpp, read at rocm-systems 749a2ee4 for
ROCm 7.0 and 07d5a7fa for the 3.0.x line; facts, no code) writes them:
- every API call, kernel dispatch and memory copy gets a rocpd_event row: category_id (the buffer
  kind's name: HIP_RUNTIME_API_EXT, MARKER_CORE_RANGE_API, KERNEL_DISPATCH, MEMORY_COPY),
  stack_id = the record's INTERNAL correlation id (a dispatch or copy carries the internal id of the
  API call that launched it), correlation_id = the EXTERNAL correlation id (0 unless the user's tool
  or --kernel-rename set one), and for ROCTx ranges extdata {"message": ...};
- an API call with start != end is a rocpd_region row whose id is the internal correlation id and
  whose name_id is the operation's name (for ROCTx: roctxThreadRangeA / roctxProcessRangeA, the
  message being only in the event's extdata); start == end is a rocpd_sample on a rocpd_track;
- rocpd_region.tid / rocpd_kernel_dispatch.tid are the OS thread id, which is also the
  rocpd_info_thread row's id; dispatch rows have id = dispatch_id; copies are numbered from 1;
- counter values are rocpd_pmc_event rows sharing the dispatch's event_id;
- strings (rocpd_string) are numbered from 1 in sorted order of everything the run saw; here they
  are numbered as they first appear (the order is not part of the layout any reader can rely on).
Foreign keys are on (the 7.0 schema turns them on itself), so a row naming a thread, agent, queue,
stream, symbol or string that was never written fails here as it would in AMD's writer.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Iterable, Sequence

SCHEMAS = Path(__file__).resolve().parent / "fixtures" / "rocpd-schema"
SCHEMA_VERSIONS = ("3.0.0", "3.0.3")  # 3.0.0: ROCm 7.0 (and through 7.14); 3.0.3: ROCm 10.0.0
# the writer's order: tables, then the views (rocpd, data, marker, summary); indexes at the end
VIEW_FILES = ("rocpd_views", "data_views", "marker_views", "summary_views")

HIP_API = "HIP_RUNTIME_API_EXT"
MARKER_API = "MARKER_CORE_RANGE_API"
KERNEL_DISPATCH = "KERNEL_DISPATCH"
MEMORY_COPY = "MEMORY_COPY"
CPU_AGENT, GPU_AGENT = 0, 1  # KFD node ids: rocpd_info_agent.id is the agent's node id


def session_guid(pid: int) -> str:
    """A uuid v7 in the writer's text form (its value is arbitrary; its shape is what matters)."""
    return f"0197a3f2-{pid >> 16 & 0xFFFF:04x}-7{pid & 0xFFF:03x}-8000-{pid:012x}"


class RocpdWriter:
    def __init__(self, path: Path, schema: str = "3.0.0", pid: int = 4242, hostname: str = "node1",
                 command: str = "python3 train.py", guid: str | None = None, journal: str | None = None,
                 fast: bool = False) -> None:
        """`journal`: a journal mode (WAL ...); `fast`: no journal and no syncs (the benchmark's
        millions of rows)."""
        self.path, self.pid, self.schema = Path(path), pid, schema
        self.guid = guid or session_guid(pid)
        self.uuid = "_" + self.guid.replace("-", "_")
        self.db = sqlite3.connect(self.path)
        if journal or fast:
            self.db.execute(f"PRAGMA journal_mode = {journal or 'OFF'}")
        if fast:
            self.db.execute("PRAGMA synchronous = OFF")
        self._run("rocpd_tables")
        self.db.execute("PRAGMA foreign_keys = ON")
        for name in VIEW_FILES:
            self._run(name)
        self.nid = 1
        self._strings: dict[str, int] = {}
        self._threads: set[int] = set()
        self._agents: set[int] = set()
        self._streams: set[int] = set()
        self._queues: set[int] = set()
        self._symbols: dict[str, int] = {}
        self._counters: dict[str, int] = {}
        self._tracks: dict[tuple[int, int], int] = {}
        self.event_id = 0
        self.correlation = 0  # internal correlation ids, as the SDK numbers them: from 1
        self.dispatch_id = 0
        self.copy_id = 0
        self.pmc_id = 0
        self._insert("rocpd_info_node", id=self.nid, hash=7, machine_id=f"machine-{hostname}", hostname=hostname,
                     system_name="Linux")
        self._insert("rocpd_info_process", id=pid, nid=self.nid, ppid=1, pid=pid, init=0, fini=0, start=0, end=0,
                     command=command)
        self.string("")  # the writer's first string: the empty region name of an unrenamed dispatch
        self.stream(0)
        self.queue(0)
        self.agent(CPU_AGENT, "CPU")
        self.agent(GPU_AGENT, "GPU")
        self._insert("rocpd_info_code_object", id=1, nid=self.nid, pid=pid, agent_id=GPU_AGENT, uri="file:///app#offset=0")

    # ------------------------------------------------------------------ schema and plain rows
    def _run(self, name: str) -> None:
        path = SCHEMAS / self.schema / f"{name}.sql"
        if path.exists():
            self.db.executescript(path.read_text().replace("{{uuid}}", self.uuid).replace("{{guid}}", self.guid))

    def _insert(self, table: str, **values: object) -> None:
        names = ", ".join(f'"{k}"' for k in values)
        marks = ", ".join("?" for _ in values)
        self.db.execute(f"INSERT INTO `{table}{self.uuid}` ({names}) VALUES ({marks})", tuple(values.values()))

    def string(self, text: str) -> int:
        if text not in self._strings:
            self._strings[text] = len(self._strings) + 1
            self._insert("rocpd_string", id=self._strings[text], string=text)
        return self._strings[text]

    def thread(self, tid: int) -> int:
        if tid not in self._threads:
            self._threads.add(tid)
            self._insert("rocpd_info_thread", id=tid, nid=self.nid, ppid=1, pid=self.pid, tid=tid)
        return tid

    def agent(self, node: int, kind: str = "GPU") -> int:
        if node not in self._agents:
            self._agents.add(node)
            self._insert("rocpd_info_agent", id=node, nid=self.nid, pid=self.pid, type=kind, absolute_index=node,
                         logical_index=node, type_index=0, name="gfx942" if kind == "GPU" else "CPU")
        return node

    def stream(self, handle: int) -> int:
        if handle not in self._streams:
            self._streams.add(handle)
            self._insert("rocpd_info_stream", id=handle, nid=self.nid, pid=self.pid,
                         name="Default Stream" if handle == 0 else f"Stream {len(self._streams) - 2}")
        return handle

    def queue(self, handle: int) -> int:
        if handle not in self._queues:
            self._queues.add(handle)
            self._insert("rocpd_info_queue", id=handle, nid=self.nid, pid=self.pid,
                         name="Default Queue" if handle == 0 else f"Queue {len(self._queues) - 2}")
        return handle

    def symbol(self, name: str) -> int:
        if name not in self._symbols:
            self._symbols[name] = len(self._symbols) + 1
            self._insert("rocpd_info_kernel_symbol", id=self._symbols[name], nid=self.nid, pid=self.pid,
                         code_object_id=1, kernel_name=name, display_name=name)
        return self._symbols[name]

    def _event(self, category: str, stack_id: int, parent: int, external: int, extdata: str = "{}",
               call_stack: str = "{}") -> int:
        self.event_id += 1
        self._insert("rocpd_event", id=self.event_id, category_id=self.string(category), stack_id=stack_id,
                     parent_stack_id=parent, correlation_id=external, extdata=extdata, call_stack=call_stack)
        return self.event_id

    def sampled(self, frames: Sequence[tuple[str, str]], start: int, end: int, tid: int,
                category: str = "timer_sampling") -> None:
        """One call-stack sample interval as rocprof-sys 1.2 writes it (sampling.cpp
        rocpd_post_process_timer_data; facts, no code): per frame, outermost first, an event of the
        sampling category (stack, parent and correlation ids 0; call_stack {"name", "pc", "file"}),
        a region over the interval named by the function, and a sample on the thread's "(S)" track.
        `frames`: (function, file). Region ids are the table's own (rocprof-sys lets SQLite number them)."""
        self.thread(tid)
        key = (tid, self.string(f"Thread 0 (S) {tid}"))
        if key not in self._tracks:
            self._tracks[key] = len(self._tracks) + 1
            self._insert("rocpd_track", id=self._tracks[key], nid=self.nid, pid=self.pid, tid=tid, name_id=key[1])
        for depth, (function, where) in enumerate(frames):
            stack = json.dumps({"name": function, "pc": hex(0x401000 + 0x40 * depth), "file": where})
            event = self._event(category, 0, 0, 0, call_stack=stack)
            self._insert("rocpd_region", nid=self.nid, pid=self.pid, tid=tid, start=start, end=end,
                         name_id=self.string(function), event_id=event)
            self._insert("rocpd_sample", track_id=self._tracks[key], timestamp=start, event_id=event)

    # ------------------------------------------------------------------ records
    def api(self, name: str, start: int, end: int, tid: int, category: str = HIP_API, external: int = 0,
            message: str | None = None, ancestor: int = 0) -> int:
        """One traced API call; its internal correlation id (what its kernels and copies carry)."""
        self.correlation += 1
        internal = self.correlation
        extdata = json.dumps({"message": message}, indent=4) if message is not None else "{}"
        event = self._event(category, internal, ancestor, external, extdata)
        self.thread(tid)
        if start != end:
            self._insert("rocpd_region", id=internal, nid=self.nid, pid=self.pid, tid=tid, start=start, end=end,
                         name_id=self.string(name), event_id=event)
        else:
            key = (tid, self.string(category))
            if key not in self._tracks:
                self._tracks[key] = len(self._tracks) + 1
                self._insert("rocpd_track", id=self._tracks[key], nid=self.nid, pid=self.pid, tid=tid, name_id=key[1])
            self._insert("rocpd_sample", id=internal, track_id=self._tracks[key], timestamp=start, event_id=event)
        return internal

    def marker(self, message: str, start: int, end: int, tid: int, process_wide: bool = False) -> int:
        """A ROCTx range (roctxRangePush/Pop: roctxThreadRangeA; roctxRangeStart/Stop:
        roctxProcessRangeA) or, with start == end, a roctxMark."""
        name = "roctxMarkA" if start == end else "roctxProcessRangeA" if process_wide else "roctxThreadRangeA"
        return self.api(name, start, end, tid, category=MARKER_API, message=message)

    def dispatch(self, kernel: str, start: int, end: int, launched_by: int, tid: int, queue: int = 0x7F3A5C000000,
                 stream: int = 0, agent: int = GPU_AGENT, external: int = 0) -> int:
        """One kernel dispatch launched by the API call whose internal correlation id is
        `launched_by`; its event id (counter values hang from it)."""
        self.dispatch_id += 1
        event = self._event(KERNEL_DISPATCH, launched_by, launched_by, external)
        self._insert("rocpd_kernel_dispatch", id=self.dispatch_id, nid=self.nid, pid=self.pid, tid=self.thread(tid),
                     agent_id=self.agent(agent), kernel_id=self.symbol(kernel), dispatch_id=self.dispatch_id,
                     queue_id=self.queue(queue), stream_id=self.stream(stream), start=start, end=end,
                     private_segment_size=0, group_segment_size=0, workgroup_size_x=256, workgroup_size_y=1,
                     workgroup_size_z=1, grid_size_x=65536, grid_size_y=1, grid_size_z=1,
                     region_name_id=self.string(""), event_id=event)
        return event

    def dispatches(self, rows: Iterable[Sequence[object]], tid: int, queue: int = 0x7F3A5C000000, stream: int = 0,
                   agent: int = GPU_AGENT) -> None:
        """Many dispatches at once, (kernel, start, end, launched_by) each, with the same rows and
        events `dispatch` writes (for the benchmark's millions)."""
        self.thread(tid), self.queue(queue), self.stream(stream), self.agent(agent)
        category, empty = self.string(KERNEL_DISPATCH), self.string("")
        events, kernels = [], []
        for kernel, start, end, launched_by in rows:
            self.event_id += 1
            self.dispatch_id += 1
            events.append((self.event_id, category, launched_by, launched_by, 0))
            kernels.append((self.dispatch_id, self.nid, self.pid, tid, agent, self.symbol(str(kernel)),
                            self.dispatch_id, queue, stream, start, end, self.event_id, empty))
        self.db.executemany(f"INSERT INTO `rocpd_event{self.uuid}` (id, category_id, stack_id, parent_stack_id, "
                            "correlation_id) VALUES (?, ?, ?, ?, ?)", events)
        self.db.executemany(
            f"INSERT INTO `rocpd_kernel_dispatch{self.uuid}` (id, nid, pid, tid, agent_id, kernel_id, dispatch_id, "
            "queue_id, stream_id, start, \"end\", event_id, region_name_id, workgroup_size_x, workgroup_size_y, "
            "workgroup_size_z, grid_size_x, grid_size_y, grid_size_z) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 256, 1, 1, 65536, 1, 1)", kernels)

    def copy(self, name: str, start: int, end: int, launched_by: int, tid: int, size: int = 1 << 20,
             src: int = CPU_AGENT, dst: int = GPU_AGENT, stream: int = 0, external: int = 0) -> int:
        """One memory copy (name: MEMORY_COPY_HOST_TO_DEVICE ...) launched by `launched_by`."""
        self.copy_id += 1
        event = self._event(MEMORY_COPY, launched_by, launched_by, external)
        self._insert("rocpd_memory_copy", id=self.copy_id, nid=self.nid, pid=self.pid, tid=self.thread(tid),
                     start=start, end=end, name_id=self.string(name), dst_agent_id=self.agent(dst),
                     src_agent_id=self.agent(src), size=size, stream_id=self.stream(stream), event_id=event)
        return event

    def counter(self, dispatch_event: int, name: str, value: float) -> None:
        """A counter value of the dispatch whose event id is `dispatch_event`."""
        if name not in self._counters:
            self._counters[name] = len(self._counters) + 1
            self._insert("rocpd_info_pmc", id=self._counters[name], nid=self.nid, pid=self.pid, agent_id=GPU_AGENT,
                         target_arch="GPU", name=name, symbol=name, description=name, component="SQ",
                         value_type="ABS", block="SQ", is_constant=0, is_derived=0)
        self.pmc_id += 1
        self._insert("rocpd_pmc_event", id=self.pmc_id, event_id=dispatch_event, pmc_id=self._counters[name],
                     value=value)

    def close(self) -> Path:
        self._run("rocpd_indexes")
        self.db.commit()
        self.db.close()
        return self.path

    def __enter__(self) -> "RocpdWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.close()
        else:
            self.db.close()
