"""A PowerSummary as people read it: one line for the run and one for energy per step (the power
section of the report, report/sections/power.py, adds its table per GPU; JSON keeps the raw numbers)."""

from __future__ import annotations

import statistics

from profilectl.model import units
from profilectl.telemetry.model import PowerSummary

# the formatters live with every other unit of the reports (model/units.py)
watts, joules, size = units.watts, units.joules, units.size


def seconds(value: float) -> str:
    return units.duration_s(value) if value < 120 else f"{value / 60:.1f} min"


def energy_method(method: str | None) -> str:
    return {"counter": "energy counter", "trapezoid": "power samples (trapezoid)",
            "mixed": "counters where the GPU has one, else power samples"}.get(method or "", units.MISSING)


def power_line(power: PowerSummary) -> str:
    """The run's power in one line."""
    gpus = f"{len(power.gpus)} GPUs, " if len(power.gpus) > 1 else ""
    energy = joules(power.energy_j)
    if power.energy_j is not None:
        energy += f" from the {energy_method(power.energy_method)}"
        if power.energy_method != "trapezoid" and power.trapezoid_energy_j is not None:
            energy += f" (power samples: {joules(power.trapezoid_energy_j)})"
    return (f"GPU power ({power.source}, {gpus}{power.samples} samples every {seconds(power.interval_s)} over "
            f"{seconds(power.duration_s)}): average {watts(power.avg_power_w)}, peak {watts(power.peak_power_w)}, "
            f"energy {energy}, peak memory {size(power.peak_memory_bytes)}"
            + (f" of {size(power.gpus[0].memory_total_bytes)}" if len(power.gpus) == 1 and
               power.gpus[0].memory_total_bytes else ""))


def steps_line(power: PowerSummary) -> str | None:
    """Energy per steady-state step in one line (None without step marks)."""
    covered = [s for s in power.steps if s.covered_s > 0]
    if not covered:
        return None
    energy = [s.energy_j for s in covered]
    line = (f"energy per step ({len(covered)} steady steps): median {joules(statistics.median(energy))}, "
            f"min {joules(min(energy))}, max {joules(max(energy))}; median power "
            f"{watts(statistics.median(s.avg_power_w for s in covered))}")
    if statistics.median((s.end_ns - s.start_ns) / 1e9 for s in covered) < 2 * power.interval_s:
        line += f" (steps shorter than two samples: power interpolated between the {seconds(power.interval_s)} samples)"
    if len(covered) < len(power.steps):
        line += f"; {len(power.steps) - len(covered)} steps outside the sampled window left out"
    return line
