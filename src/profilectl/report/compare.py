"""Two summaries kernel by kernel: time, calls, speedup, kernels only in one, totals.

Works across backends and tools wherever kernel names match (rocprofv3 vs rocprof, or two ncu runs);
`--match base` matches by function name for tools that spell namespaces and templates differently.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Callable

from profilectl.report.summary import KernelRow, Summary

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


@dataclass(frozen=True)
class Matched:
    name: str
    calls_a: int
    calls_b: int
    total_ns_a: float
    total_ns_b: float
    delta_ns: float
    speedup: float | None


@dataclass(frozen=True)
class OnlyIn:
    name: str
    calls: int
    total_ns: float


@dataclass(frozen=True)
class RankDelta:
    """One rank's GPU time in both runs (ranks matched by number, or by process where unnumbered)."""
    rank: str
    total_ns_a: float
    total_ns_b: float
    speedup: float | None


@dataclass(frozen=True)
class Comparison:
    a: str
    b: str
    match: str
    kernels: tuple[Matched, ...]
    only_in_a: tuple[OnlyIn, ...]
    only_in_b: tuple[OnlyIn, ...]
    gpu_time_ns_a: float
    gpu_time_ns_b: float
    speedup: float | None
    kernel_timing_a: str | None = None
    kernel_timing_b: str | None = None
    ranks: tuple[RankDelta, ...] = ()

    @property
    def warning(self) -> str | None:
        """Kernel times measured differently (a counters run's replay against a trace) are not comparable."""
        if self.kernel_timing_a == self.kernel_timing_b:
            return None
        return (f"kernel times are measured differently: A by {self.kernel_timing_a or 'a trace'}, B by "
                f"{self.kernel_timing_b or 'a trace'}; a replay with locked clocks runs kernels slower than a trace")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["warning"] = self.warning
        # JSON layout kept from the first version: totals grouped.
        out["totals"] = {"gpu_time_ns_a": out.pop("gpu_time_ns_a"), "gpu_time_ns_b": out.pop("gpu_time_ns_b"),
                         "speedup": out.pop("speedup"), "matched": len(self.kernels),
                         "kernels_a": len(self.kernels) + len(self.only_in_a),
                         "kernels_b": len(self.kernels) + len(self.only_in_b)}
        return out


def _keyed(kernels: tuple[KernelRow, ...], key: Callable[[str], str]) -> dict[str, OnlyIn]:
    """Kernels by match key; kernels sharing a key (template instances) are added up."""
    out: dict[str, OnlyIn] = {}
    for k in kernels:
        name = key(k.name)
        before = out.get(name, OnlyIn(name=name, calls=0, total_ns=0.0))
        out[name] = OnlyIn(name=name, calls=before.calls + k.calls, total_ns=before.total_ns + k.total_ns)
    return out


def compare(a: Summary, b: Summary, match: str = "exact") -> Comparison:
    key = base_name if match == "base" else canonical
    ka, kb = _keyed(a.kernels, key), _keyed(b.kernels, key)
    both = [Matched(name=n, calls_a=ka[n].calls, calls_b=kb[n].calls, total_ns_a=ka[n].total_ns,
                    total_ns_b=kb[n].total_ns, delta_ns=kb[n].total_ns - ka[n].total_ns,
                    speedup=ka[n].total_ns / kb[n].total_ns if kb[n].total_ns else None)
            for n in ka.keys() & kb.keys()]
    both.sort(key=lambda r: abs(r.delta_ns), reverse=True)
    total_a = sum(k.total_ns for k in ka.values())
    total_b = sum(k.total_ns for k in kb.values())
    return Comparison(
        a=a.source.path, b=b.source.path, match=match, kernels=tuple(both),
        only_in_a=tuple(sorted((ka[n] for n in ka.keys() - kb.keys()), key=lambda r: -r.total_ns)),
        only_in_b=tuple(sorted((kb[n] for n in kb.keys() - ka.keys()), key=lambda r: -r.total_ns)),
        gpu_time_ns_a=total_a, gpu_time_ns_b=total_b, speedup=total_a / total_b if total_b else None,
        kernel_timing_a=a.kernel_timing, kernel_timing_b=b.kernel_timing, ranks=rank_deltas(a, b))


def rank_deltas(a: Summary, b: Summary) -> tuple[RankDelta, ...]:
    ranks_a = {r.rank: r.total_ns for r in a.ranks}
    ranks_b = {r.rank: r.total_ns for r in b.ranks}
    both = [rank for rank in ranks_a if rank in ranks_b]
    return tuple(RankDelta(rank=rank, total_ns_a=ranks_a[rank], total_ns_b=ranks_b[rank],
                           speedup=ranks_a[rank] / ranks_b[rank] if ranks_b[rank] else None) for rank in both)
