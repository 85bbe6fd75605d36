"""Which telemetry source would sample a run here, decided from the probe's Facts without importing
or starting anything (a library is looked up with importlib.util.find_spec, a command in the tools
the probe found): the plan says it, `--dry-run` shows it, and the sampler tries the sources in order.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import Any, Mapping

from profilectl import data
from profilectl.facts import Facts
from profilectl.telemetry.model import CSV_NAME, SamplingPlan, SourceSpec

INTERVAL_S = 0.1  # ~10 Hz: fine enough for per-step energy of steps of a second, cheap for NVML


@functools.lru_cache(maxsize=None)
def telemetry_facts() -> dict[str, Any]:
    """profiling/telemetry.yaml: the sources, their names, keys and units."""
    return data.load_mapping("telemetry.yaml")


def source_facts(name: str) -> dict[str, Any]:
    entry: dict[str, Any] = telemetry_facts()["sources"][name]
    return entry


def _available(name: str, facts: Facts) -> SourceSpec | None:
    entry = source_facts(name)
    if entry["kind"] == "library":
        try:
            found = importlib.util.find_spec(entry["module"]) is not None
        except (ImportError, ValueError):
            found = False
        return SourceSpec(name) if found else None
    tool = facts.tool(entry["command"])
    return SourceSpec(name, tool.path) if tool else None


def _missing(name: str) -> str:
    entry = source_facts(name)
    if entry["kind"] == "library":
        return f"{name}: Python module {entry['module']} not installed ({entry.get('install') or entry['package']})"
    return f"{name}: {entry['command']} not on PATH"


def visible_gpus(vendor: str, environment: Mapping[str, str]) -> tuple[int, ...]:
    """The GPUs the run can see, by the first visibility variable set for this vendor (numbers
    only; UUIDs or an empty value: every GPU). NVML numbers GPUs by PCI bus, as CUDA does with
    CUDA_DEVICE_ORDER=PCI_BUS_ID; on machines of one GPU model both orders agree."""
    for name in telemetry_facts().get("visible_devices", {}).get(vendor, ()):
        value = environment.get(name)
        if value is None:
            continue
        items = [item.strip() for item in value.split(",") if item.strip()]
        if items and all(item.isdigit() for item in items):
            return tuple(dict.fromkeys(int(item) for item in items))
        return ()
    return ()


def plan_sampling(enabled: bool, facts: Facts, environment: Mapping[str, str]) -> tuple[SamplingPlan | None, str | None]:
    """The sampling plan (None: nothing is sampled) and the plan note that says so (None on a machine
    without a GPU: there is nothing to sample, and saying so adds nothing)."""
    if not enabled:
        return None, "no power sampling (--no-sample)"
    vendor = facts.vendor
    if vendor is None:
        return None, None
    order = telemetry_facts()["order"].get(vendor, [])
    specs = tuple(spec for spec in (_available(name, facts) for name in order) if spec is not None)
    if not specs:
        hints = "; ".join(_missing(name) for name in order)
        return None, f"no power sampling: no {vendor.upper()} telemetry source here ({hints})"
    gpus = visible_gpus(vendor, environment)
    plan = SamplingPlan(sources=specs, vendor=vendor, gpus=gpus, interval_s=INTERVAL_S, file=CSV_NAME)
    then = f" (else {', '.join(s.name for s in specs[1:])})" if len(specs) > 1 else ""
    which = f"GPU(s) {', '.join(map(str, gpus))}" if gpus else "every GPU it sees"
    return plan, (f"power sampling: {specs[0].name}{then}, {which}, every {INTERVAL_S:g} s into {CSV_NAME} "
                  "(--no-sample turns it off)")
