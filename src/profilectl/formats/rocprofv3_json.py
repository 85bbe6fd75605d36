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

from profilectl.formats.common import FormatError, KernelStats, kernel_rows, read_json

TOOL_KEY = "rocprofiler-sdk-tool"


def is_rocprofv3_json(path: Path) -> bool:
    try:
        with open(path, errors="replace") as fh:
            return f'"{TOOL_KEY}"' in fh.read(4096)
    except OSError:
        return False


def _load(path: Path) -> list[dict]:
    doc = read_json(path)
    tools = doc.get(TOOL_KEY) if isinstance(doc, dict) else None
    if isinstance(tools, dict):
        tools = [tools]
    if not isinstance(tools, list):
        raise FormatError(f"{path}: not rocprofv3 JSON output (no {TOOL_KEY!r} list)")
    return tools


def _operation_names(tool: dict) -> list[dict]:
    return ((tool.get("strings") or {}).get("buffer_records")) or []


def _op_name(strings: list[dict], kind: int, operation: int, fallback: str) -> str:
    try:
        return strings[kind]["operations"][operation]
    except (IndexError, KeyError, TypeError):
        return f"{fallback} {operation}"


def read(path: Path) -> tuple[dict[str, KernelStats], dict[str, KernelStats], dict[str, KernelStats]]:
    """(kernels, api calls, memory copies) as statistics, so processes merge exactly."""
    kernels: dict[str, KernelStats] = {}
    api: dict[str, KernelStats] = {}
    copies: dict[str, KernelStats] = {}
    try:
        for tool in _load(path):
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
    except (KeyError, TypeError) as exc:
        raise FormatError(f"{path}: rocprofv3 JSON record without {exc}") from None
    return kernels, api, copies


def tables(path: Path) -> dict[str, list[dict]]:
    kernels, api, copies = read(path)
    return {"kernels": kernel_rows(kernels), "api": kernel_rows(api), "memory_copies": kernel_rows(copies)}
