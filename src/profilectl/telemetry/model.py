"""Frozen values of GPU telemetry: the sampling plan, one reading, and the power summary a run keeps.

Imports nothing from profilectl, so the summary (read/summary.py) can hold a PowerSummary
without loading the sampler.
"""

from __future__ import annotations

from dataclasses import dataclass

# telemetry.csv: one row per GPU per sweep; empty cells where the source cannot read a value.
CSV_NAME = "telemetry.csv"
CSV_COLUMNS = ("timestamp_ns", "monotonic_ns", "gpu", "source", "power_w", "energy_j", "memory_used_bytes",
               "memory_total_bytes", "sm_clock_mhz", "temperature_c", "utilization_pct")


@dataclass(frozen=True)
class SourceSpec:
    """One telemetry source a run may use: its name (nvml, amdsmi, amd-smi, rocm-smi) and, for a
    command, its path."""
    name: str
    path: str | None = None


@dataclass(frozen=True)
class SamplingPlan:
    """What the run will sample: the sources in the order they are tried (the first that starts
    wins), the GPUs (their indices in the source's numbering; empty: every GPU the source sees) and
    the interval between sweeps."""
    sources: tuple[SourceSpec, ...]
    vendor: str
    gpus: tuple[int, ...] = ()
    interval_s: float = 0.1
    file: str = CSV_NAME


@dataclass(frozen=True)
class Reading:
    """One GPU's values at one sweep, in the units of telemetry.csv. energy_j is the source's own
    cumulative counter (since the driver loaded), None where it has none."""
    gpu: int
    power_w: float | None = None
    energy_j: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    sm_clock_mhz: float | None = None
    temperature_c: float | None = None
    utilization_pct: float | None = None


@dataclass(frozen=True)
class StepPower:
    """Energy and average power of one interval of the run (a training step), summed over the GPUs,
    from the power samples interpolated at its bounds (CLOCK_MONOTONIC ns, the clock of the
    step marks)."""
    start_ns: int
    end_ns: int
    energy_j: float
    avg_power_w: float  # over the part of the interval the samples cover
    samples: int  # samples inside the interval, all GPUs together
    covered_s: float  # how much of the interval lies between the first and last samples


@dataclass(frozen=True)
class GpuPower:
    """One GPU's power, energy, memory, temperature, clock and utilisation over the run, from telemetry.csv, with its
    power over time."""
    gpu: int
    samples: int
    avg_power_w: float | None
    peak_power_w: float | None
    energy_j: float | None
    energy_method: str | None  # counter | trapezoid
    peak_memory_bytes: int | None = None
    memory_total_bytes: int | None = None
    peak_temperature_c: float | None = None
    max_sm_clock_mhz: float | None = None
    mean_utilization_pct: float | None = None
    # power over time, at most MAX_SERIES points: (seconds since the first sample, W)
    series: tuple[tuple[float, float], ...] = ()


@dataclass(frozen=True)
class PowerSummary:
    """A run's GPU power, energy and memory, from telemetry.csv. Power and energy are summed over
    the GPUs sampled; peak_memory_bytes is the most any one GPU held. Energy comes from the source's
    energy counter where every GPU has one (energy_method `counter`: deltas, exact to the counter's
    resolution), else from the power samples by the trapezoid rule (`trapezoid`); trapezoid_energy_j
    is always the latter, for comparison."""
    source: str  # nvml | amdsmi | amd-smi | rocm-smi
    samples: int  # rows of telemetry.csv (one per GPU per sweep)
    interval_s: float  # median time between sweeps
    duration_s: float  # first to last sweep
    avg_power_w: float | None
    peak_power_w: float | None  # the highest sum over the GPUs at one sweep
    energy_j: float | None
    energy_method: str | None  # counter | trapezoid | mixed (some GPUs by counter)
    trapezoid_energy_j: float | None
    peak_memory_bytes: int | None
    gpus: tuple[GpuPower, ...] = ()
    steps: tuple[StepPower, ...] = ()
    power_reading: str | None = None  # how the source reads power (instantaneous or an average)
    file: str = CSV_NAME
