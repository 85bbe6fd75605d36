"""telemetry.csv -> PowerSummary, and energy per interval (a training step).

Energy of a GPU over the sampled window: the difference of its energy counter between the first
and last samples where the source has one (NVML's total energy in mJ, AMD SMI's accumulator; exact
to the counter's resolution, whatever happens between two samples), else the trapezoid rule over
its power samples (exact for power that changes linearly between samples; a spike shorter than the
interval is missed). A counter that goes backwards (a driver reload) falls back to the trapezoid.

The file is read in one streaming pass (a day at 10 Hz on 8 GPUs is 7 million rows); the power
series kept for charts is downsampled on the way (bucket means, at most MAX_SERIES per GPU).
"""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, NamedTuple, Sequence

from profilectl.telemetry.model import CSV_COLUMNS, GpuPower, PowerSummary, StepPower

MAX_SERIES = 300


class Sample(NamedTuple):
    timestamp_ns: int
    monotonic_ns: int
    gpu: int
    source: str
    power_w: float | None
    energy_j: float | None
    memory_used_bytes: int | None
    memory_total_bytes: int | None
    sm_clock_mhz: float | None
    temperature_c: float | None
    utilization_pct: float | None


def _opt_float(text: str) -> float | None:
    return float(text) if text else None


def _opt_int(text: str) -> int | None:
    return int(float(text)) if text else None


def row_parser(header_line: str) -> "Callable[[str], Sample | None] | None":
    """The parser of one row of a telemetry.csv with this header (None: not the sampler's header).
    A row returns None when it does not parse or has another width; the caller drops it."""
    header = header_line.rstrip("\r\n").split(",")
    where = {name: header.index(name) for name in CSV_COLUMNS if name in header}
    if not {"monotonic_ns", "gpu"} <= where.keys():
        return None
    width = len(header)

    def cell(cells: list[str], name: str) -> str:
        index = where.get(name)
        return cells[index] if index is not None else ""

    def parse(line: str) -> Sample | None:
        cells = line.rstrip("\r\n").split(",")
        if len(cells) != width:
            return None
        try:
            return Sample(
                timestamp_ns=int(cell(cells, "timestamp_ns") or 0), monotonic_ns=int(cell(cells, "monotonic_ns")),
                gpu=int(cell(cells, "gpu")), source=cell(cells, "source"),
                power_w=_opt_float(cell(cells, "power_w")), energy_j=_opt_float(cell(cells, "energy_j")),
                memory_used_bytes=_opt_int(cell(cells, "memory_used_bytes")),
                memory_total_bytes=_opt_int(cell(cells, "memory_total_bytes")),
                sm_clock_mhz=_opt_float(cell(cells, "sm_clock_mhz")),
                temperature_c=_opt_float(cell(cells, "temperature_c")),
                utilization_pct=_opt_float(cell(cells, "utilization_pct")))
        except ValueError:
            return None
    return parse


def read_samples(path: Path) -> Iterator[Sample]:
    """The complete rows of a telemetry.csv (a last line cut short by a crash is left out; so is a
    row that does not parse)."""
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        parse = row_parser(fh.readline())
        if parse is None:
            return
        for line in fh:
            if not line.endswith("\n"):
                return  # written half when profilectl was killed
            sample = parse(line)
            if sample is not None:
                yield sample


class _Series:
    """Power over time in at most MAX_SERIES bucket means: buckets start 1 ns wide and are merged
    in pairs (the width doubling) whenever there are too many, so one pass needs no known length."""

    def __init__(self, origin_ns: int):
        self.origin = origin_ns
        self.width_ns = 1
        self.buckets: dict[int, list[float]] = {}  # bucket number -> [sum of offsets, sum of W, count]

    def add(self, t_ns: int, watts: float) -> None:
        offset = t_ns - self.origin
        bucket = self.buckets.setdefault(offset // self.width_ns, [0.0, 0.0, 0.0])
        bucket[0] += offset
        bucket[1] += watts
        bucket[2] += 1
        while len(self.buckets) > MAX_SERIES:
            merged: dict[int, list[float]] = {}
            for number, (t, w, n) in self.buckets.items():
                into = merged.setdefault(number // 2, [0.0, 0.0, 0.0])
                into[0] += t
                into[1] += w
                into[2] += n
            self.buckets, self.width_ns = merged, self.width_ns * 2

    def points(self) -> tuple[tuple[float, float], ...]:
        return tuple((round(t / n / 1e9, 3), round(w / n, 2)) for _, (t, w, n) in sorted(self.buckets.items()))


@dataclass
class _Gpu:
    """Running totals of one GPU."""
    gpu: int
    samples: int = 0
    last_t: int | None = None
    last_p: float | None = None
    first_power_t: int | None = None
    trapezoid_j: float = 0.0
    peak_w: float | None = None
    first_energy: float | None = None
    last_energy: float | None = None
    first_energy_t: int | None = None
    last_energy_t: int | None = None
    counter_ok: bool = True
    peak_memory: int | None = None
    memory_total: int | None = None
    peak_temperature: float | None = None
    max_clock: float | None = None
    utilisation_sum: float = 0.0
    utilisation_n: int = 0
    series: _Series | None = field(default=None, repr=False)

    def add(self, s: Sample, origin_ns: int) -> None:
        self.samples += 1
        if s.power_w is not None:
            if self.last_t is not None and self.last_p is not None and s.monotonic_ns > self.last_t:
                self.trapezoid_j += (self.last_p + s.power_w) / 2 * (s.monotonic_ns - self.last_t) / 1e9
            if self.first_power_t is None:
                self.first_power_t = s.monotonic_ns
            self.last_t, self.last_p = s.monotonic_ns, s.power_w
            self.peak_w = s.power_w if self.peak_w is None else max(self.peak_w, s.power_w)
            if self.series is None:
                self.series = _Series(origin_ns)
            self.series.add(s.monotonic_ns, s.power_w)
        if s.energy_j is not None:
            if self.first_energy is None:
                self.first_energy, self.first_energy_t = s.energy_j, s.monotonic_ns
            elif self.last_energy is not None and s.energy_j < self.last_energy:
                self.counter_ok = False  # went backwards: the driver reloaded, or the counter wrapped
            self.last_energy, self.last_energy_t = s.energy_j, s.monotonic_ns
        if s.memory_used_bytes is not None:
            self.peak_memory = max(self.peak_memory or 0, s.memory_used_bytes)
        if s.memory_total_bytes is not None:
            self.memory_total = s.memory_total_bytes
        if s.temperature_c is not None:
            self.peak_temperature = s.temperature_c if self.peak_temperature is None else \
                max(self.peak_temperature, s.temperature_c)
        if s.sm_clock_mhz is not None:
            self.max_clock = s.sm_clock_mhz if self.max_clock is None else max(self.max_clock, s.sm_clock_mhz)
        if s.utilization_pct is not None:
            self.utilisation_sum += s.utilization_pct
            self.utilisation_n += 1

    def energy(self) -> tuple[float | None, str | None, float]:
        """(energy J, method, seconds it covers)."""
        if self.counter_ok and self.first_energy is not None and self.last_energy is not None and \
                self.last_energy_t is not None and self.first_energy_t is not None and \
                self.last_energy_t > self.first_energy_t:
            return self.last_energy - self.first_energy, "counter", (self.last_energy_t - self.first_energy_t) / 1e9
        if self.first_power_t is not None and self.last_t is not None and self.last_t > self.first_power_t:
            return self.trapezoid_j, "trapezoid", (self.last_t - self.first_power_t) / 1e9
        return None, None, 0.0

    def value(self) -> GpuPower:
        energy, method, seconds = self.energy()
        return GpuPower(gpu=self.gpu, samples=self.samples,
                        avg_power_w=energy / seconds if energy is not None and seconds > 0 else self.last_p,
                        peak_power_w=self.peak_w, energy_j=energy, energy_method=method,
                        peak_memory_bytes=self.peak_memory, memory_total_bytes=self.memory_total,
                        peak_temperature_c=self.peak_temperature, max_sm_clock_mhz=self.max_clock,
                        mean_utilization_pct=self.utilisation_sum / self.utilisation_n if self.utilisation_n else None,
                        series=self.series.points() if self.series else ())


def summarise(samples: Iterable[Sample], power_reading: str | None = None) -> PowerSummary | None:
    """The run's power, energy and memory from its samples (None when there are none)."""
    gpus: dict[int, _Gpu] = {}
    sweeps: list[int] = []
    sweep_power = 0.0
    peak_sum: float | None = None
    source = ""
    origin: int | None = None
    rows = 0
    for s in samples:
        rows += 1
        source = source or s.source
        if origin is None:
            origin = s.monotonic_ns
        if not sweeps or s.monotonic_ns != sweeps[-1]:  # the rows of one sweep share its time
            if sweeps:
                peak_sum = sweep_power if peak_sum is None else max(peak_sum, sweep_power)
            sweeps.append(s.monotonic_ns)
            sweep_power = 0.0
        sweep_power += s.power_w or 0.0
        gpus.setdefault(s.gpu, _Gpu(s.gpu)).add(s, origin)
    if not rows:
        return None
    if any(g.peak_w is not None for g in gpus.values()):
        peak_sum = sweep_power if peak_sum is None else max(peak_sum, sweep_power)
    else:
        peak_sum = None
    per_gpu = tuple(gpus[g].value() for g in sorted(gpus))
    energies = [g.energy_j for g in per_gpu]
    methods = {g.energy_method for g in per_gpu if g.energy_method}
    energy = sum(e for e in energies if e is not None) if any(e is not None for e in energies) else None
    trapezoid = sum(g.trapezoid_j for g in gpus.values()) if any(g.first_power_t is not None for g in gpus.values()) \
        else None
    duration = (sweeps[-1] - sweeps[0]) / 1e9
    deltas = [(b - a) / 1e9 for a, b in zip(sweeps, sweeps[1:])]
    powered = [g.avg_power_w for g in per_gpu if g.avg_power_w is not None]
    return PowerSummary(
        source=source, samples=rows, interval_s=statistics.median(deltas) if deltas else 0.0, duration_s=duration,
        avg_power_w=energy / duration if energy is not None and duration > 0 else (sum(powered) if powered else None),
        peak_power_w=peak_sum, energy_j=energy,
        energy_method=(methods.pop() if len(methods) == 1 else "mixed") if methods else None,
        trapezoid_energy_j=trapezoid,
        peak_memory_bytes=max((g.peak_memory_bytes for g in per_gpu if g.peak_memory_bytes is not None), default=None),
        gpus=per_gpu, power_reading=power_reading)


def summarise_file(path: Path, power_reading: str | None = None) -> PowerSummary | None:
    """A run directory's telemetry.csv summarised (None when it has no sample)."""
    return summarise(read_samples(path), power_reading)


def step_energy(samples: Iterable[Sample], intervals: Sequence[tuple[int, int]],
                clock: str = "monotonic") -> tuple[StepPower, ...]:
    """Energy and average power of each interval (start_ns, end_ns), summed over the GPUs: each GPU's
    power is taken as linear between its samples and integrated over the part of the interval its
    samples cover (nothing is extrapolated). Intervals come back in the order given. `clock`:
    "monotonic" (CLOCK_MONOTONIC ns: the step marks of profilectl's start-up hook, perf_counter_ns)
    or "wall" (ns since the epoch: a trace's step ranges converted to wall time)."""
    curves: dict[int, tuple[list[int], list[float]]] = {}
    for s in samples:
        t = s.monotonic_ns if clock == "monotonic" else s.timestamp_ns
        if s.power_w is not None:
            times, watts = curves.setdefault(s.gpu, ([], []))
            if not times or t > times[-1]:
                times.append(t)
                watts.append(s.power_w)
    out = []
    for start, end in intervals:
        energy, covered, inside = 0.0, 0.0, 0
        for times, watts in curves.values():
            joules, seconds = _integrate(times, watts, start, end)
            energy += joules
            covered = max(covered, seconds)
            inside += bisect.bisect_right(times, end) - bisect.bisect_left(times, start)
        out.append(StepPower(start_ns=start, end_ns=end, energy_j=energy,
                             avg_power_w=energy / covered if covered > 0 else 0.0, samples=inside,
                             covered_s=covered))
    return tuple(out)


def _integrate(times: list[int], watts: list[float], start: int, end: int) -> tuple[float, float]:
    """Integral of the piecewise-linear power over [start, end] ∩ [first sample, last sample]."""
    if len(times) < 2:
        return 0.0, 0.0
    a, b = max(start, times[0]), min(end, times[-1])
    if b <= a:
        return 0.0, 0.0

    def at(t: int) -> float:
        i = bisect.bisect_right(times, t)
        if i >= len(times):
            return watts[-1]
        t0, t1 = times[i - 1], times[i]
        return watts[i - 1] + (watts[i] - watts[i - 1]) * (t - t0) / (t1 - t0)
    points = [(a, at(a))] + [(times[i], watts[i]) for i in range(bisect.bisect_right(times, a),
                                                                   bisect.bisect_left(times, b))] + [(b, at(b))]
    joules = sum((p0 + p1) / 2 * (t1 - t0) / 1e9 for (t0, p0), (t1, p1) in zip(points, points[1:]))
    return joules, (b - a) / 1e9
