"""rocprofv3 `--output-format json` (<pid>_results.json), read to the layout its writer produces
(rocprofiler-sdk source/lib/rocprofiler-sdk-tool/generateJSON.cpp, docs/rocprofv3-schema.json):

    {"rocprofiler-sdk-tool": [{"metadata": {"pid": ...}, "kernel_symbols": [{kernel_id,
      formatted_kernel_name, ...}], "strings": {"buffer_records": [{kind, operations: [...]}]},
      "buffer_records": {"kernel_dispatch": [{start_timestamp, end_timestamp, dispatch_info:
      {kernel_id, ...}}], "hip_api": [{kind, operation, start_timestamp, ...}], "memory_copy": [...]}}]}

The whole document is loaded: JSON output is meant for small runs (use CSV or rocpd for large ones).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from profilectl.errors import FormatError
from profilectl.files import read_json
from profilectl.formats.reader import Reader, first_bytes
from profilectl.formats.tables import PER_DISPATCH, KernelStats, Tables

if TYPE_CHECKING:
    from profilectl.model.timeline import RankTimeline

TOOL_KEY = "rocprofiler-sdk-tool"


def is_rocprofv3_json(path: Path) -> bool:
    return path.suffix == ".json" and f'"{TOOL_KEY}"'.encode() in first_bytes(path)


def _load(path: Path) -> list[dict[str, Any]]:
    doc = read_json(path)
    tools = doc.get(TOOL_KEY) if isinstance(doc, dict) else None
    if isinstance(tools, dict):
        tools = [tools]
    if not isinstance(tools, list):
        raise FormatError(f"{path}: not rocprofv3 JSON output (no {TOOL_KEY!r} list)")
    return tools


def _operation_names(tool: dict[str, Any]) -> list[dict[str, Any]]:
    return ((tool.get("strings") or {}).get("buffer_records")) or []


def _op_name(strings: list[dict[str, Any]], kind: int, operation: int, fallback: str) -> str:
    try:
        return str(strings[kind]["operations"][operation])
    except (IndexError, KeyError, TypeError):
        return f"{fallback} {operation}"


def read(path: Path, tools: list[dict[str, Any]] | None = None
         ) -> tuple[dict[str, KernelStats], dict[str, KernelStats], dict[str, KernelStats]]:
    """(kernels, api calls, memory copies) as statistics, so processes merge exactly. `tools`: the
    file's document already loaded (_load), so it is parsed once."""
    kernels: dict[str, KernelStats] = {}
    api: dict[str, KernelStats] = {}
    copies: dict[str, KernelStats] = {}
    try:
        for tool in _load(path) if tools is None else tools:
            symbols = tool.get("kernel_symbols") or []
            names = ({s.get("kernel_id", i): s.get("formatted_kernel_name") or s.get("kernel_name") or f"kernel {i}"
                      for i, s in enumerate(symbols) if isinstance(s, dict)})
            strings = _operation_names(tool)
            records = tool.get("buffer_records") or {}
            for d in records.get("kernel_dispatch") or []:
                kernel_id = (d.get("dispatch_info") or {}).get("kernel_id")
                name = names.get(kernel_id, f"kernel {kernel_id}")
                kernels.setdefault(name, KernelStats()).add(float(d["end_timestamp"] - d["start_timestamp"]))
            for domain in ("hip_api", "hsa_api", "rccl_api", "marker_api"):
                for r in records.get(domain) or []:
                    name = _op_name(strings, r.get("kind"), r.get("operation"), domain)
                    api.setdefault(name, KernelStats()).add(float(r["end_timestamp"] - r["start_timestamp"]))
            for r in records.get("memory_copy") or []:
                name = _op_name(strings, r.get("kind"), r.get("operation"), "memory copy")
                copies.setdefault(name, KernelStats()).add(float(r["end_timestamp"] - r["start_timestamp"]))
    except KeyError as exc:
        raise FormatError(f"{path}: rocprofv3 JSON record without {exc}") from None
    except (TypeError, AttributeError, ValueError) as exc:
        raise FormatError(f"{path}: malformed rocprofv3 JSON record ({exc})") from None
    return kernels, api, copies


def _correlation(record: dict[str, Any]) -> int:
    value = (record.get("correlation_id") or {}).get("internal")
    return value if isinstance(value, int) else -1


def timeline(path: Path, tools: list[dict[str, Any]] | None = None) -> tuple["RankTimeline", ...]:
    """Each process's dispatches, copies, API calls and step markers, for the timeline analysis."""
    from profilectl.model.timeline import COPY, KERNEL, Marker, rank_timeline
    from profilectl.formats import ranks
    from profilectl.formats.rocprofv3 import STEP_NAME
    found = []
    try:
        tools = _load(path) if tools is None else tools
        for tool in tools:
            symbols = {s.get("kernel_id", i): s.get("formatted_kernel_name") or s.get("kernel_name") or f"kernel {i}"
                       for i, s in enumerate(tool.get("kernel_symbols") or []) if isinstance(s, dict)}
            strings = _operation_names(tool)
            records = tool.get("buffer_records") or {}
            events = []
            for d in records.get("kernel_dispatch") or []:
                info = d.get("dispatch_info") or {}
                stream = f"{(info.get('agent_id') or {}).get('handle')}:{(info.get('queue_id') or {}).get('handle')}"
                name = symbols.get(info.get("kernel_id"), f"kernel {info.get('kernel_id')}")
                events.append((d["start_timestamp"], d["end_timestamp"], name, stream, _correlation(d), KERNEL))
            for r in records.get("memory_copy") or []:
                events.append((r["start_timestamp"], r["end_timestamp"],
                               _op_name(strings, r.get("kind"), r.get("operation"), "memory copy"), "copies",
                               _correlation(r), COPY))
            api = [(r["start_timestamp"], r["end_timestamp"], _correlation(r)) for r in records.get("hip_api") or []]
            markers = [Marker(text, r["start_timestamp"], r["end_timestamp"], False)
                       for r in records.get("marker_api") or []
                       if r["end_timestamp"] > r["start_timestamp"]
                       and STEP_NAME.match(text := _op_name(strings, r.get("kind"), r.get("operation"), ""))]
            if not events:
                continue
            rank, host = ranks.identity(path)
            pid = (tool.get("metadata") or {}).get("pid")
            names: dict[str, int] = {}
            streams: dict[str, int] = {}
            found.append(rank_timeline(
                str(pid) if pid is not None and len(tools) > 1 else rank, host,
                start=[e[0] for e in events], end=[e[1] for e in events],
                stream=[streams.setdefault(e[3], len(streams)) for e in events], kind=[e[5] for e in events],
                name=[names.setdefault(e[2], len(names)) for e in events], correlation=[e[4] for e in events],
                names=list(names), streams=list(streams), api_start=[a[0] for a in api],
                api_end=[a[1] for a in api], api_correlation=[a[2] for a in api], markers=markers))
    except KeyError as exc:
        raise FormatError(f"{path}: rocprofv3 JSON record without {exc}") from None
    except (TypeError, AttributeError, ValueError) as exc:
        raise FormatError(f"{path}: malformed rocprofv3 JSON record ({exc})") from None
    return tuple(found)


class Rocprofv3JsonReader(Reader):
    kind = "rocprofv3-json"

    def recognises(self, path: Path) -> bool:
        return is_rocprofv3_json(path)

    def read_file(self, path: Path) -> Tables:
        tools = _load(path)
        kernels, api, copies = read(path, tools)
        return Tables(kernels=kernels, kernel_detail=PER_DISPATCH if kernels else 0, api=api, memory_copies=copies,
                      timelines=timeline(path, tools) if kernels else ())
