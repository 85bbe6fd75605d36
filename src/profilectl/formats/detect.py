"""What is at PATH, and its tables: a profilectl run, or files a tool wrote by hand.

Recognised: rocprofv3 CSV (any 6.2-7.x column set, one set of files per process/rank, merged and
per rank) and JSON, rocpd SQLite databases, legacy rocprof results.csv / results.stats.csv, rocprofv2
results_<pid>.csv, Nsight Compute --csv output, torch.profiler Chrome traces.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from profilectl.formats import engine, ncu, rocprof_legacy, rocprofv3, rocprofv3_json, torch_trace
from profilectl.formats.common import FormatError, KernelStats, kernel_rows


@dataclass
class Source:
    kind: str
    path: Path
    files: list[Path] = field(default_factory=list)


def _first_line(path: Path) -> str:
    try:
        with open(path, errors="replace") as fh:
            for line in fh:
                if not line.startswith("=="):  # ncu interleaves ==PROF== lines
                    return line
    except OSError:
        pass
    return ""


def _is_chrome_trace(path: Path) -> bool:
    try:
        with open(path, errors="replace") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return '"traceEvents"' in head or head.lstrip().startswith("[")


ROCPROFV3_KINDS = ("kernel_trace", "counter_collection", "hip_api_trace", "hip_runtime_api_trace",
                   "memory_copy_trace")


def rocprofv3_kind(name: str) -> str | None:
    """<pid>_kernel_trace.csv -> kernel_trace (a file renamed without its pid prefix still counts)."""
    for kind in ROCPROFV3_KINDS:
        if name == f"{kind}.csv" or name.endswith(f"_{kind}.csv"):
            return kind
    return None


def classify(path: Path) -> str | None:
    name = path.name
    if name.endswith(".db") and engine.is_rocpd(path):
        return "rocpd"
    if name.endswith(".csv"):
        if rocprofv3_kind(name):
            return "rocprofv3-csv"
        if name == "results.csv" or (name.startswith("results_") and name[8:-4].isdigit()):
            return "rocprof-results"
        if name == "results.stats.csv":
            return "rocprof-stats"
        first = _first_line(path)
        if '"Metric Name"' in first or "Metric Name" in first.split(","):
            return "ncu-csv"
    if name == "results.json":
        return "rocprof-trace"  # legacy rocprof's Chrome trace: opened in Perfetto, not tabulated
    if name.endswith(".json") and rocprofv3_json.is_rocprofv3_json(path):
        return "rocprofv3-json"
    if name.endswith(".json") and _is_chrome_trace(path):
        return "chrome-trace"
    return None


def detect(path: Path) -> list[Source]:
    if not path.exists():
        raise FormatError(f"{path} does not exist")
    candidates = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    by_kind: dict[str, Source] = {}
    for candidate in candidates:
        kind = classify(candidate)
        if kind:
            by_kind.setdefault(kind, Source(kind, path)).files.append(candidate)
    if not by_kind:
        what = "file" if path.is_file() else "directory"
        raise FormatError(f"{path}: no profiler output recognised in this {what} (rocprofv3 CSV or rocpd, "
                          "rocprof results, ncu CSV, torch.profiler trace)")
    return list(by_kind.values())


def read(sources: list[Source]) -> dict[str, list[dict]]:
    """Normalized tables from every recognised source (kernels merged across files/ranks)."""
    tables: dict[str, list[dict]] = {}
    kernel_stats: dict[str, KernelStats] = {}
    copy_stats: dict[str, KernelStats] = {}
    region_stats: dict[str, KernelStats] = {}
    ranks: list[dict] = []
    for source in sources:
        files = source.files
        if source.kind == "rocprofv3-csv":
            traces = [f for f in files if rocprofv3_kind(f.name) == "kernel_trace"]
            if traces:
                merged, rank_rows = rocprofv3.merged_kernel_stats(traces)
                for name, stats in merged.items():
                    kernel_stats.setdefault(name, KernelStats()).merge(stats)
                ranks += rank_rows
            api = [f for f in files if rocprofv3_kind(f.name) in ("hip_api_trace", "hip_runtime_api_trace")]
            if api:
                tables["api"] = rocprofv3.api_trace(api)
            copies = [f for f in files if rocprofv3_kind(f.name) == "memory_copy_trace"]
            if copies:
                tables["memory_copies"] = rocprofv3.memory_copies(copies)
            counters = [f for f in files if rocprofv3_kind(f.name) == "counter_collection"]
            if counters:
                tables.setdefault("counters", []).extend(rocprofv3.counter_collection(counters))
        elif source.kind == "rocpd":
            for db in files:
                per_db = engine.rocpd_kernels(db)
                for name, stats in per_db.items():
                    kernel_stats.setdefault(name, KernelStats()).merge(stats)
                ranks.append({"rank": db.stem, "kernels": len(per_db), "dispatches": sum(s.calls for s in per_db.values()),
                              "total_ns": sum(s.total for s in per_db.values())})
                for name, stats in engine.rocpd_memory_copies(db).items():
                    copy_stats.setdefault(name, KernelStats()).merge(stats)
                for name, stats in engine.rocpd_regions(db).items():
                    region_stats.setdefault(name, KernelStats()).merge(stats)
                tables.setdefault("counters", []).extend(engine.rocpd_counters(db))
        elif source.kind == "rocprof-results":
            for path in files:
                kernels, counters = rocprof_legacy.results(path)
                tables.setdefault("legacy_kernels", []).extend(kernels)
                tables.setdefault("counters", []).extend(counters)
        elif source.kind == "rocprof-stats":
            tables["legacy_stats"] = rocprof_legacy.stats_file(files[0])
        elif source.kind == "ncu-csv":
            for path in files:
                metrics = ncu.metrics(path)
                tables.setdefault("counters", []).extend(metrics)
                tables.setdefault("ncu_kernels", []).extend(ncu.kernels(metrics))
        elif source.kind == "rocprofv3-json":
            api_stats: dict[str, KernelStats] = {}
            for path in files:
                kernels, api, copies = rocprofv3_json.read(path)
                for target, part in ((kernel_stats, kernels), (api_stats, api), (copy_stats, copies)):
                    for name, stats in part.items():
                        target.setdefault(name, KernelStats()).merge(stats)
            if api_stats:
                tables["api"] = kernel_rows(api_stats)
        elif source.kind == "chrome-trace":
            for path in files:
                for name, rows in torch_trace.tables(path).items():
                    if rows:
                        tables[name] = rows
    # Kernels from the most detailed source there is: per-dispatch records, then per-dispatch legacy
    # results, then ncu durations, then legacy rocprof's pre-aggregated stats.
    fallbacks = [tables.pop(k, []) for k in ("legacy_kernels", "ncu_kernels", "legacy_stats")]
    if kernel_stats:
        tables["kernels"] = kernel_rows(kernel_stats)
    elif "kernels" not in tables:
        tables["kernels"] = next((rows for rows in fallbacks if rows), [])
    if copy_stats:
        tables["memory_copies"] = kernel_rows(copy_stats)
    if region_stats:
        tables["api"] = kernel_rows(region_stats)
    if len(ranks) > 1:
        tables["ranks"] = ranks
    return {k: v for k, v in tables.items() if v}


TRACE_KINDS = ("chrome-trace", "rocprof-trace")
TRACE_SUFFIXES = (".pftrace",)


def trace_files(path: Path, sources: list[Source]) -> list[Path]:
    """Files under path that open in Perfetto: Chrome traces, legacy results.json, .pftrace."""
    found = [f for s in sources if s.kind in TRACE_KINDS for f in s.files]
    if path.is_dir():
        found += sorted(p for p in path.rglob("*") if p.suffix in TRACE_SUFFIXES)
    return found

