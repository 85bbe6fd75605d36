"""The NCCL inspector plugin's output (NCCL's ext-profiler/inspector, libnccl-profiler-inspector.so;
RCCL ships the same plugin): one JSON object per line, one line per collective per communicator,
in <dump dir>/<hostname>-pid<pid>.log (inspectorStateDumpJSON; its own exporter also reads .jsonl
and their .gz):

    {"header": {"id": "0x7f8c496ae9f661", "rank": 2, "n_ranks": 8, "nnodes": 1},
     "metadata": {"inspector_output_format_version": "v4.0", "dump_timestamp_us": ..., "hostname": ...,
                  "pid": ...},
     "coll_perf": {"coll": "AllReduce", "coll_sn": 1407, "coll_msg_size_bytes": 17179869184,
                   "coll_exec_time_us": 61974, "coll_timing_source": "kernel_gpu",
                   "coll_algobw_gbs": 277.21, "coll_busbw_gbs": 485.12}}

(ext-profiler/inspector/README.md, "Output Example"). Lines of other records (a dump's stats,
point-to-point records) are passed over, as the plugin's own exporter passes them; a line that is
not JSON is counted and said, never a traceback. Files are read bounded ($PROFILECTL_MAX_INSPECTOR_BYTES,
default 4 GiB, never through a link)."""

from __future__ import annotations

import gzip
import io
import json
import re
from pathlib import Path
from typing import Any

from profilectl.errors import FormatError
from profilectl.formats.reader import Reader
from profilectl.model.tables import Tables
from profilectl.model.collectives import InspectorRecord

NAME = re.compile(r"^(?P<host>.+)-pid(?P<pid>\d+)\.(log|jsonl)(\.gz)?$")
MAX_BYTES = 4 << 30
HEAD = 8192


def _text(path: Path, limit: int) -> str:
    from profilectl.files import read_regular
    raw = read_regular(path, limit, "PROFILECTL_MAX_INSPECTOR_BYTES")
    if path.name.endswith(".gz"):
        try:
            with gzip.open(io.BytesIO(raw)) as fh:
                raw = fh.read(limit + 1)
        except (OSError, EOFError) as exc:
            raise FormatError(f"{path}: truncated or corrupt gzip file ({exc})") from None
        if len(raw) > limit:
            raise FormatError(f"{path}: inflates past {limit:,} bytes (PROFILECTL_MAX_INSPECTOR_BYTES)")
    return raw.decode("utf-8", errors="replace")


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def record_of(doc: Any) -> InspectorRecord | None:
    if not isinstance(doc, dict):
        return None
    header, metadata, perf = doc.get("header"), doc.get("metadata"), doc.get("coll_perf")
    if not isinstance(header, dict) or not isinstance(perf, dict) or not isinstance(perf.get("coll"), str):
        return None
    metadata = metadata if isinstance(metadata, dict) else {}
    return InspectorRecord(
        host=str(metadata.get("hostname", "")), pid=_whole(metadata.get("pid")), rank=_whole(header.get("rank")),
        ranks=_whole(header.get("n_ranks")), nodes=_whole(header.get("nnodes")),
        communicator=str(header.get("id", "")), kind=perf["coll"], sequence=_whole(perf.get("coll_sn")),
        bytes=_whole(perf.get("coll_msg_size_bytes")), time_us=_number(perf.get("coll_exec_time_us")),
        timing=str(perf.get("coll_timing_source", "")), algbw_gbs=_number(perf.get("coll_algobw_gbs")),
        busbw_gbs=_number(perf.get("coll_busbw_gbs")))


def read(path: Path) -> Tables:
    from profilectl.files import env_limit
    records, broken = [], 0
    for line in _text(path, env_limit("MAX_INSPECTOR_BYTES", MAX_BYTES)).splitlines():
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError):
            broken += 1
            continue
        record = record_of(doc)
        if record is not None:
            records.append(record)
    notes = (f"{path.name}: {broken} line(s) that are not JSON passed over (a dump cut short?)",) if broken else ()
    return Tables(inspector=tuple(records), notes=notes)


def recognised(path: Path) -> bool:
    """Its name (<host>-pid<N>.log) and a first line that is one of its records."""
    if not NAME.match(path.name) or not path.is_file():
        return False
    try:
        opener: Any = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rb") as fh:
            first = fh.readline(1 << 20)
    except (OSError, EOFError):
        return False
    return b'"coll_perf"' in first or (b'"header"' in first and b'"metadata"' in first)


class NcclInspectorReader(Reader):
    kind = "nccl-inspector"

    def recognises(self, path: Path) -> bool:
        return recognised(path)

    def read_file(self, path: Path) -> Tables:
        return read(path)
