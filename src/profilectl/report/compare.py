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


def base_name(name: str) -> str:
    """The kernel's function name alone: `void at::native::(anonymous namespace)::foo<float, 4>(int)`
    and `void at::<unnamed>::foo<float, 4, ...>(...)` are both `foo`. Tools spell namespaces and
    template arguments differently (ncu vs torch.profiler), but not the function name. Names that
    are not C++ signatures ("Memcpy DtoH (Device -> Pinned)", cuBLAS kernel names) stay whole."""
    text = canonical(name).replace("<unnamed>", "_unnamed_")
    match = re.search(r"[A-Za-z0-9_]([<(])", text)  # a bracket right after an identifier
    if not match:
        return canonical(name)
    qualified = text[:match.start(1)].split()[-1]
    return qualified.split("::")[-1]


def _keyed(kernels: list[dict], key) -> dict[str, dict]:
    """Kernels by match key; kernels sharing a key (template instances) are added up."""
    out: dict[str, dict] = {}
    for k in kernels:
        entry = out.setdefault(key(k["name"]), {"name": key(k["name"]), "calls": 0, "total_ns": 0.0})
        entry["calls"] += int(k.get("calls") or 0)
        entry["total_ns"] += float(k.get("total_ns") or 0)
    return out


def compare(a: dict[str, Any], b: dict[str, Any], match: str = "exact") -> dict[str, Any]:
    key = base_name if match == "base" else canonical
    ka = _keyed(a.get("kernels") or [], key)
    kb = _keyed(b.get("kernels") or [], key)
    both = []
    for name in ka.keys() & kb.keys():
        ta, tb = float(ka[name].get("total_ns") or 0), float(kb[name].get("total_ns") or 0)
        both.append({"name": name, "calls_a": ka[name]["calls"], "calls_b": kb[name]["calls"], "total_ns_a": ta,
                     "total_ns_b": tb, "delta_ns": tb - ta, "speedup": ta / tb if tb else None})
    both.sort(key=lambda r: abs(r["delta_ns"]), reverse=True)
    total_a = sum(float(k.get("total_ns") or 0) for k in ka.values())
    total_b = sum(float(k.get("total_ns") or 0) for k in kb.values())
    return {
        "a": (a.get("source") or {}).get("path"), "b": (b.get("source") or {}).get("path"), "match": match,
        "kernels": both,
        "only_in_a": sorted(({"name": n, "calls": ka[n]["calls"], "total_ns": ka[n].get("total_ns")} for n in ka.keys() - kb.keys()),
                            key=lambda r: -float(r["total_ns"] or 0)),
        "only_in_b": sorted(({"name": n, "calls": kb[n]["calls"], "total_ns": kb[n].get("total_ns")} for n in kb.keys() - ka.keys()),
                            key=lambda r: -float(r["total_ns"] or 0)),
        "totals": {"gpu_time_ns_a": total_a, "gpu_time_ns_b": total_b,
                   "speedup": total_a / total_b if total_b else None,
                   "matched": len(both), "kernels_a": len(ka), "kernels_b": len(kb)},
    }
