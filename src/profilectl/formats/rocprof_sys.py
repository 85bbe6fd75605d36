"""rocprof-sys (rocprofiler-systems) output: its rocpd database is read by formats/rocpd.py (the same
schema rocprofv3 writes, with the sampled call stacks as host activity); its Perfetto trace
(perfetto-trace[-<pid>].proto) is kept for the Perfetto UI and named in the manifest, not parsed:
its track events are interned and incrementally timed protobuf that only Perfetto's own trace
processor (a native binary) reads in full, and the database holds the same records."""

from __future__ import annotations

import re
from pathlib import Path

from profilectl.formats.reader import Reader
from profilectl.formats.tables import Tables

PERFETTO_NAME = re.compile(r"^perfetto-trace(-\d+)?\.proto$")  # rocprof-sys's default ROCPROFSYS_PERFETTO_FILE


class RocprofSysPerfettoReader(Reader):
    kind = "rocprof-sys-perfetto"

    def recognises(self, path: Path) -> bool:
        return PERFETTO_NAME.match(path.name) is not None

    def read(self, files: list[Path]) -> Tables:
        return Tables(trace_files=tuple(str(p) for p in files))
