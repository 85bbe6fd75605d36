"""Two runs kernel by kernel: time, calls, speedup, kernels only in one, totals.

Works across backends and tools wherever kernel names match (rocprofv3 vs rocprof, or two ncu runs).
"""

from __future__ import annotations

import re
from typing import Any

# The same kernel as different tools spell it: ncu and rocprofv3 print "<unnamed>" where
# torch.profiler (CUPTI/roctracer demangling) prints "(anonymous namespace)".
_SPELLINGS = [(re.compile(r"\(anonymous namespace\)"), "<unnamed>"), (re.compile(r"\s+"), " ")]


def canonical(name: str) -> str:
    for pattern, replacement in _SPELLINGS:
        name = pattern.sub(replacement, name)
    return name.strip()


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    ka = {canonical(k["name"]): k for k in a.get("kernels") or []}
    kb = {canonical(k["name"]): k for k in b.get("kernels") or []}
    both = []
    for name in ka.keys() & kb.keys():
        ta, tb = float(ka[name].get("total_ns") or 0), float(kb[name].get("total_ns") or 0)
        both.append({"name": name, "calls_a": ka[name]["calls"], "calls_b": kb[name]["calls"], "total_ns_a": ta,
                     "total_ns_b": tb, "delta_ns": tb - ta, "speedup": ta / tb if tb else None})
    both.sort(key=lambda r: abs(r["delta_ns"]), reverse=True)
    total_a = sum(float(k.get("total_ns") or 0) for k in ka.values())
    total_b = sum(float(k.get("total_ns") or 0) for k in kb.values())
    return {
        "a": (a.get("source") or {}).get("path"), "b": (b.get("source") or {}).get("path"),
        "kernels": both,
        "only_in_a": sorted(({"name": n, "calls": ka[n]["calls"], "total_ns": ka[n].get("total_ns")} for n in ka.keys() - kb.keys()),
                            key=lambda r: -float(r["total_ns"] or 0)),
        "only_in_b": sorted(({"name": n, "calls": kb[n]["calls"], "total_ns": kb[n].get("total_ns")} for n in kb.keys() - ka.keys()),
                            key=lambda r: -float(r["total_ns"] or 0)),
        "totals": {"gpu_time_ns_a": total_a, "gpu_time_ns_b": total_b,
                   "speedup": total_a / total_b if total_b else None,
                   "matched": len(both), "kernels_a": len(ka), "kernels_b": len(kb)},
    }
