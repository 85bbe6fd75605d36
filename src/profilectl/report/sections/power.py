"""GPU power, energy and memory sampled during the run (telemetry.csv): the run in a line, a row
per GPU, energy per step, and the power over time."""

from __future__ import annotations

import dataclasses

from profilectl.model.document import Chart, Section
from profilectl.report.sections.common import table_of
from profilectl.read.summary import Summary

GPU_TITLES = {"gpu": "GPU", "avg_power_w": "avg power", "peak_power_w": "peak power", "energy_j": "energy",
              "peak_memory_bytes": "peak memory", "memory_total_bytes": "memory", "peak_temperature_c": "peak temp",
              "max_sm_clock_mhz": "max SM clock", "mean_utilization_pct": "mean util"}


def build(summary: Summary) -> Section | None:
    power = summary.power
    if power is None:
        return None
    from profilectl.telemetry import text
    notes = [text.power_line(power)] + ([line] if (line := text.steps_line(power)) else [])
    gpus = [{k: v for k, v in dataclasses.asdict(g).items() if k != "series"} for g in power.gpus]
    tables = []
    if gpus:
        tables.append(table_of("power", gpus, GPU_TITLES, title="GPU power per GPU", shown=len(gpus)))
    if power.steps:
        tables.append(table_of("step_energy", power.steps, shown=0))
    samples = [{"gpu": g.gpu, "time_s": t, "power_w": w} for g in power.gpus for t, w in g.series]
    charts: tuple[Chart, ...] = ()
    if samples:
        tables.append(table_of("power_samples", samples, shown=0))
        charts = (Chart(kind="line", title=f"GPU power over time ({power.source})", table="power_samples",
                        x="time_s", y="power_w", label="gpu", extra=(("source", power.source),)),)
    return Section(key="power", title="GPU power and energy", notes=tuple(notes), tables=tuple(tables), charts=charts)

