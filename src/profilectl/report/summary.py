"""A run's summary: computed once from the normalized tables, stored as summary.json.

Reporting a finished run reads this file only, so it costs the same whatever the trace size; a
bare output directory's summary is cached outside the user's files (report/cache.py).
"""

from __future__ import annotations

from typing import Any

from profilectl.countersets import evaluate

SUMMARY_SCHEMA = 1


def counters_by_kernel(rows: list[dict], derived: dict[str, str]) -> list[dict]:
    """Wide table: one row per kernel, one column per counter, then the derived metrics."""
    kernels: dict[str, dict[str, Any]] = {}
    for row in rows:
        kernels.setdefault(row["kernel"], {"kernel": row["kernel"]})[row["counter"]] = row["value"]
    for values in kernels.values():
        numbers = {k: v for k, v in values.items() if k != "kernel"}
        for name, expression in derived.items():
            result = evaluate(expression, numbers)
            if result is not None:
                values[name] = result
    return list(kernels.values())


def build(tables: dict[str, list[dict]], source: dict[str, Any], derived: dict[str, str] | None = None,
          run: dict[str, Any] | None = None, perfetto_trace: str | None = None) -> dict[str, Any]:
    kernels = tables.get("kernels") or []
    by_kernel = tables.get("counters_by_kernel") or (
        counters_by_kernel(tables["counters"], derived or {}) if tables.get("counters") else [])
    return {
        "schema_version": SUMMARY_SCHEMA,
        "source": source,
        "run": run,
        "perfetto_trace": perfetto_trace,
        "totals": {"kernels": len(kernels), "dispatches": sum(int(k.get("calls") or 0) for k in kernels),
                   "gpu_time_ns": sum(float(k.get("total_ns") or 0) for k in kernels)},
        "kernels": kernels,
        "api": tables.get("api", []),
        "memory_copies": tables.get("memory_copies", []),
        "operators": tables.get("operators", []),
        "counters_by_kernel": by_kernel,
        "derived": sorted((derived or {}).keys()),
        "ranks": tables.get("ranks", []),
        "timing": (tables.get("timing_summary") or [None])[0],
    }


def run_story(manifest: dict[str, Any]) -> dict[str, Any]:
    """What a report shows of the manifest: the service, the choice and the fallback story."""
    keys = ("service", "backend", "reason", "fallbacks", "status", "message", "exit_code", "started_at",
            "wall_seconds", "workload", "notes")
    return {k: manifest.get(k) for k in keys}
