"""Two summaries kernel by kernel: time, calls, speedup, kernels only in one, totals; two timing
(profile) runs by their timing statistics; and the CI gate: one metric, BASE against NEW, judged
against a threshold (`compare --fail-if-slower PCT --metric ...`).

Works across backends and tools wherever kernel names match (rocprofv3 vs rocprof, or two ncu runs);
`--match base` matches by function name for tools that spell namespaces and templates differently.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import asdict, dataclass
from typing import Any, Callable

from profilectl.errors import UsageError
from profilectl.model import units
from profilectl.read.summary import KernelRow, Summary

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
    """A kernel (or copy) in both runs: its calls and total time in A and B, B's change, and the speedup A / B."""
    name: str
    calls_a: int
    calls_b: int
    total_ns_a: float
    total_ns_b: float
    delta_ns: float
    speedup: float | None


@dataclass(frozen=True)
class MatchedOperator:
    """A CPU operator in both runs. Operators nest, so they are compared by self time (the time in
    the operator itself, which adds up across operators); the inclusive totals are kept beside it.
    delta_ns and speedup are of self time. Tools that report no self time (XLA's ops, which do not
    nest): self_ns_* are their totals."""
    name: str
    calls_a: int
    calls_b: int
    self_ns_a: float
    self_ns_b: float
    total_ns_a: float
    total_ns_b: float
    delta_ns: float
    speedup: float | None


@dataclass(frozen=True)
class OnlyIn:
    """A kernel (or copy) of one run, by its match key: its calls and total time (those one run has and the other
    lacks are listed as these)."""
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
class TimingDelta:
    """One statistic of two timing runs, in seconds; speedup A / B (above 1: B is faster). std has
    no speedup: a smaller spread is not a faster run."""
    stat: str  # mean, median, p95, min, max, std; "step median": the steady-state step time
    a_s: float
    b_s: float
    speedup: float | None


@dataclass(frozen=True)
class Gate:
    """The CI gate's verdict: one metric in BASE (A) and NEW (B), NEW's change in percent (positive:
    slower), and whether it crossed the threshold."""
    metric: str  # gpu-time, kernel:REGEX, step-time, wall-time
    description: str  # what was measured, in words
    unit: str  # of base and new: "ns" or "s"
    base: float
    new: float
    change_percent: float  # (new - base) / base * 100
    threshold_percent: float | None  # None: measured, not gated
    verdict: str  # pass, fail, or measured (no threshold)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Comparison:
    """Two summaries compared: kernels matched and found in one only, GPU time and speedup, ranks, timing statistics,
    operators and the CI gate."""
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
    timing: tuple[TimingDelta, ...] = ()  # both runs timed (profile): their statistics side by side
    timing_runs_a: int = 0
    timing_runs_b: int = 0
    gate: Gate | None = None
    # CPU operators (torch.profiler) matched by name, by self time: what two CPU-only traces compare
    operators: tuple[MatchedOperator, ...] = ()

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


def matched(ka: dict[str, OnlyIn], kb: dict[str, OnlyIn]) -> list[Matched]:
    """Names in both, largest change first."""
    both = [Matched(name=n, calls_a=ka[n].calls, calls_b=kb[n].calls, total_ns_a=ka[n].total_ns,
                    total_ns_b=kb[n].total_ns, delta_ns=kb[n].total_ns - ka[n].total_ns,
                    speedup=ka[n].total_ns / kb[n].total_ns if kb[n].total_ns else None)
            for n in ka.keys() & kb.keys()]
    both.sort(key=lambda r: abs(r.delta_ns), reverse=True)
    return both


def compare(a: Summary, b: Summary, match: str = "exact") -> Comparison:
    """Device activity by name: kernels, and copies and memsets (GPU time is both: a change whose
    copies grew 14x is slower, whatever its kernels do; docs/definitions.md)."""
    key = base_name if match == "base" else canonical
    ka, kb = _keyed(a.kernels + a.memory_copies, key), _keyed(b.kernels + b.memory_copies, key)
    both = matched(ka, kb)
    total_a = sum(k.total_ns for k in ka.values())
    total_b = sum(k.total_ns for k in kb.values())
    return Comparison(
        a=a.source.path, b=b.source.path, match=match, kernels=tuple(both),
        only_in_a=tuple(sorted((ka[n] for n in ka.keys() - kb.keys()), key=lambda r: -r.total_ns)),
        only_in_b=tuple(sorted((kb[n] for n in kb.keys() - ka.keys()), key=lambda r: -r.total_ns)),
        gpu_time_ns_a=total_a, gpu_time_ns_b=total_b, speedup=total_a / total_b if total_b else None,
        kernel_timing_a=a.kernel_timing, kernel_timing_b=b.kernel_timing, ranks=rank_deltas(a, b),
        timing=timing_deltas(a, b), timing_runs_a=a.timing.runs if a.timing else 0,
        timing_runs_b=b.timing.runs if b.timing else 0,
        operators=matched_operators(a.operators, b.operators))


def matched_operators(a: tuple[KernelRow, ...], b: tuple[KernelRow, ...]) -> tuple[MatchedOperator, ...]:
    """Operators in both runs by canonical name, largest change of self time first."""
    def keyed(rows: tuple[KernelRow, ...]) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for row in rows:
            sums = out.setdefault(canonical(row.name), [0, 0.0, 0.0])
            sums[0] += row.calls
            sums[1] += row.self_ns if row.self_ns is not None else row.total_ns
            sums[2] += row.total_ns
        return out
    ka, kb = keyed(a), keyed(b)
    both = [MatchedOperator(name=n, calls_a=int(ka[n][0]), calls_b=int(kb[n][0]), self_ns_a=ka[n][1],
                            self_ns_b=kb[n][1], total_ns_a=ka[n][2], total_ns_b=kb[n][2],
                            delta_ns=kb[n][1] - ka[n][1], speedup=ka[n][1] / kb[n][1] if kb[n][1] else None)
            for n in ka.keys() & kb.keys()]
    both.sort(key=lambda r: (-abs(r.delta_ns), r.name))
    return tuple(both)


def operators_line(result: Comparison) -> str:
    """The operators' self time in A and B: each operator's own time once, so the sums mean CPU time
    spent in operators (inclusive totals would count nested operators again)."""
    self_a = sum(r.self_ns_a for r in result.operators)
    self_b = sum(r.self_ns_b for r in result.operators)
    from profilectl.model.units import duration_ns
    return (f"no GPU kernels in either run: {len(result.operators)} CPU operators in both, compared by self time "
            f"(their own time, nested operators not counted twice): {duration_ns(self_a)} → {duration_ns(self_b)}"
            + (f" (speedup {units.speedup(self_a / self_b)})" if self_b else ""))


def nothing_line() -> str:
    return ("nothing to compare: neither run has GPU kernels or timed runs, and no CPU operator is in both "
            "(try `profilectl report` on each)")


def rank_deltas(a: Summary, b: Summary) -> tuple[RankDelta, ...]:
    ranks_a = {r.rank: r.total_ns for r in a.ranks}
    ranks_b = {r.rank: r.total_ns for r in b.ranks}
    both = [rank for rank in ranks_a if rank in ranks_b]
    return tuple(RankDelta(rank=rank, total_ns_a=ranks_a[rank], total_ns_b=ranks_b[rank],
                           speedup=ranks_a[rank] / ranks_b[rank] if ranks_b[rank] else None) for rank in both)


TIMING_STATS = ("mean", "median", "p95", "min", "max", "std")


def timing_deltas(a: Summary, b: Summary) -> tuple[TimingDelta, ...]:
    """Two timed runs statistic by statistic, and their steady-state step times where both have them."""
    if a.timing is None or b.timing is None:
        return ()
    rows = []
    for stat in TIMING_STATS:
        value_a, value_b = getattr(a.timing, stat + "_s"), getattr(b.timing, stat + "_s")
        rows.append(TimingDelta(stat=stat, a_s=value_a, b_s=value_b,
                                speedup=value_a / value_b if value_b and stat != "std" else None))
    steps_a, steps_b = steady_step_s(a), steady_step_s(b)
    if steps_a and steps_b:
        rows.append(TimingDelta(stat="step median", a_s=steps_a[0], b_s=steps_b[0],
                                speedup=steps_a[0] / steps_b[0] if steps_b[0] else None))
    return tuple(rows)


# ---------------------------------------------------------------- the CI gate
METRICS = ("gpu-time", "kernel-time", "copy-time", "kernel:REGEX", "step-time", "wall-time")
MAX_THRESHOLD_PERCENT = 1000.0  # beyond 11x slower a threshold gates nothing: a typo, refused


def parse_metric(text: str) -> str:
    """A metric name as --metric takes it; a kernel regex is compiled here so a bad one is a usage error."""
    if text.startswith("kernel:") and text[len("kernel:"):]:
        try:
            re.compile(text[len("kernel:"):])
        except re.error as exc:
            raise UsageError(f"--metric {text}: not a regular expression: {exc}") from None
        return text
    if text in METRICS:
        return text
    raise UsageError(f"--metric {text!r}: expected {', '.join(METRICS[:-1])} or {METRICS[-1]}")


def parse_threshold(text: str) -> float:
    """--fail-if-slower PCT: a percentage from 0 to MAX_THRESHOLD_PERCENT ('5', '2.5', '5%')."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise UsageError(f"--fail-if-slower {text!r}: expected a percentage such as 5 or 2.5") from None
    if not 0 <= value <= MAX_THRESHOLD_PERCENT:  # also refuses nan; inf is above the bound
        raise UsageError(f"--fail-if-slower {text!r}: the threshold must be between 0 and "
                         f"{MAX_THRESHOLD_PERCENT:.0f} percent")
    return value


def steady_step_s(summary: Summary) -> tuple[float, str] | None:
    """The steady-state step time (median, seconds) and where it comes from: the `profile` run's
    step marks, else the trace's ProfilerStep ranges with the warm-up steps left out."""
    if summary.step_time is not None:
        return summary.step_time.median_s, "median; step marks of the timed runs"
    steps = [s for s in summary.timeline.steps if s.steady] if summary.timeline else []
    if steps:
        return statistics.median(s.wall_ns for s in steps) / 1e9, "median; ProfilerStep ranges, warm-up left out"
    return None


def _label(summary: Summary) -> str:
    return summary.source.path


def _value(summary: Summary, metric: str) -> tuple[float, str, str, tuple[str, ...]]:
    """(value, unit, description, notes) of one metric in one run; a usage error saying why not."""
    where = _label(summary)
    totals = summary.totals
    if metric in ("gpu-time", "kernel-time", "copy-time"):
        if not summary.kernels and not summary.memory_copies:
            raise UsageError(f"GPU time unavailable in {where}: it has no kernels or copies (a timing run? try "
                             "--metric wall-time or step-time)")
        if metric == "gpu-time":
            return totals.gpu_time_ns, "ns", "total GPU time (kernels, copies and memsets)", \
                (f"kernels {units.duration_ns(totals.kernel_time_ns)}, copies and memsets "
                 f"{units.duration_ns(totals.copy_time_ns)}",)
        if metric == "kernel-time":
            return totals.kernel_time_ns, "ns", "GPU time in kernels", ()
        return totals.copy_time_ns, "ns", "GPU time in copies and memsets", ()
    if metric.startswith("kernel:"):
        pattern = re.compile(metric[len("kernel:"):])
        matched = [k for k in summary.kernels if pattern.search(k.name)]
        if not matched:
            raise UsageError(f"no kernel matches {pattern.pattern!r} in {where} "
                             f"({len(summary.kernels)} kernels there)")
        calls = sum(k.calls for k in matched)
        return (sum(k.total_ns for k in matched), "ns",
                f"GPU time of kernels matching {pattern.pattern!r}", (f"{len(matched)} kernel(s), {calls} calls",))
    if metric == "step-time":
        steady = steady_step_s(summary)
        if steady is None:
            raise UsageError(f"step time unavailable in {where}: no step marks (a `profile` run of a Python "
                             "workload records them at each optimizer.step() or profilectl.step()) and no "
                             "ProfilerStep ranges in a trace")
        return steady[0], "s", f"steady-state step time ({steady[1]})", ()
    raise UsageError(f"unknown metric {metric!r}")  # wall-time is judged on both runs together


def _wall(a: Summary, b: Summary) -> tuple[float, float, str]:
    """Both runs' wall time measured the same way: the timing runs' median when both were timed,
    else the runs' wall time from their manifests."""
    if a.timing and b.timing:
        return a.timing.median_s, b.timing.median_s, (f"wall time (median of {a.timing.runs} vs "
                                                      f"{b.timing.runs} timed runs)")
    for summary in (a, b):
        if summary.run is None or summary.run.wall_seconds is None:
            raise UsageError(f"wall time unavailable in {_label(summary)}: neither timed runs (`profile`) nor a "
                             "run manifest with its wall time (files a tool wrote hold none)")
    assert a.run and b.run and a.run.wall_seconds is not None and b.run.wall_seconds is not None
    return a.run.wall_seconds, b.run.wall_seconds, "wall time (whole run, manifest.json)"


def default_metric(a: Summary, b: Summary) -> str:
    """gpu-time when both runs have device activity, else wall-time."""
    return "gpu-time" if (a.kernels or a.memory_copies) and (b.kernels or b.memory_copies) else "wall-time"


def gate(a: Summary, b: Summary, metric: str | None, threshold: float | None) -> Gate:
    """BASE (a) against NEW (b) on one metric; `fail` when NEW is slower by more than the threshold."""
    metric = parse_metric(metric) if metric else default_metric(a, b)
    notes: tuple[str, ...] = ()
    if metric == "wall-time":
        base, new, description = _wall(a, b)
        unit = "s"
    else:
        base, unit, description, notes_a = _value(a, metric)
        new, _, description_b, notes_b = _value(b, metric)
        if description_b != description:  # step time from step marks on one side, ProfilerStep on the other
            notes += (f"measured differently: base {description}, new {description_b}",)
        if notes_a != notes_b:
            notes += (f"base: {'; '.join(notes_a)}", f"new: {'; '.join(notes_b)}")
        if metric == "gpu-time" and notes_a != notes_b:
            notes = notes[:-2] + (f"base {notes_a[0]}; new {notes_b[0]}",)
    if base <= 0:
        raise UsageError(f"{description} is 0 in {_label(a)}: no change can be measured against it")
    if metric in ("gpu-time", "kernel-time") or metric.startswith("kernel:"):
        if (a.kernel_timing or None) != (b.kernel_timing or None):
            notes += ("kernel times measured differently (a counters run's replay against a trace): not comparable",)
    change = 100.0 * (new - base) / base
    verdict = "measured" if threshold is None else ("fail" if change > threshold else "pass")
    return Gate(metric=metric, description=description, unit=unit, base=base, new=new, change_percent=change,
                threshold_percent=threshold, verdict=verdict, notes=notes)
