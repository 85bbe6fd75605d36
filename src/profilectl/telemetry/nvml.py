"""NVIDIA GPUs through NVML (nvidia-ml-py, import name pynvml), in profilectl's own process.

NVML calls go through ctypes, which releases the GIL for the call: the sampler thread does not hold
up profilectl's other threads while the driver answers. Names, units and field ids: profiling/
telemetry.yaml (`nvml`).
"""

from __future__ import annotations

import importlib
from typing import Any

from profilectl.telemetry.model import Reading
from profilectl.telemetry.plan import source_facts
from profilectl.telemetry.source import Probe, GpuReadings, SourceError, number

# c_nvmlValue_t member for each NVML_VALUE_TYPE_* (pynvml: NVML_VALUE_TYPE_DOUBLE = 0 ... USHORT = 6)
_VALUE_MEMBERS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")


class NvmlSource(GpuReadings):
    name = "nvml"

    def __init__(self, gpus: tuple[int, ...] = ()):
        self.wanted = gpus
        self.facts = source_facts("nvml")
        self.nvml: Any = None
        self.handles: list[tuple[int, Any]] = []
        self.instant: set[int] = set()  # GPUs whose instantaneous power field answers
        self.probe = Probe()
        self.started = False

    def open(self) -> None:
        try:
            self.nvml = importlib.import_module(self.facts["module"])
        except ImportError as exc:
            raise SourceError(f"cannot import {self.facts['module']} ({self.facts['package']}): {exc}") from None
        nvml = self.nvml
        try:
            nvml.nvmlInit()
            self.started = True
            count = int(nvml.nvmlDeviceGetCount())
            indices = [i for i in (self.wanted or range(count)) if 0 <= i < count]
            self.handles = [(i, nvml.nvmlDeviceGetHandleByIndex(i)) for i in indices]
        except nvml.NVMLError as exc:
            self.close()
            raise SourceError(f"NVML: {exc}") from None
        if not self.handles:
            self.close()
            raise SourceError(f"NVML sees {count} GPU(s), none of {', '.join(map(str, self.wanted))}")
        for index, handle in self.handles:
            if self._instant_power(handle) is not None:
                self.instant.add(index)
        self.power_reading = ("instantaneous (NVML_FI_DEV_POWER_INSTANT)" if self.instant else
                              f"nvmlDeviceGetPowerUsage: {self.facts['power_average_note']}")
        self.read()  # learns which metrics each GPU gives
        self.probe.learning = False

    def _instant_power(self, handle: Any) -> float | None:
        """Instantaneous power in W from the field value, where the driver and bindings have it."""
        get_fields = getattr(self.nvml, "nvmlDeviceGetFieldValues", None)
        if get_fields is None:
            return None
        try:
            field = get_fields(handle, [int(self.facts["power_instant_field"])])[0]
        except (self.nvml.NVMLError, IndexError, TypeError):
            return None
        if getattr(field, "nvmlReturn", 1) != 0:
            return None
        value_type = int(getattr(field, "valueType", 1))
        member = _VALUE_MEMBERS[value_type] if 0 <= value_type < len(_VALUE_MEMBERS) else "uiVal"
        milliwatts = number(getattr(field.value, member, None))
        return milliwatts / 1000.0 if milliwatts is not None else None

    def read(self) -> list[Reading]:
        nvml, probe = self.nvml, self.probe
        errors = (nvml.NVMLError,)

        def describe(exc: BaseException) -> str:
            return f"NVML: {exc}"
        readings = []
        for index, handle in self.handles:
            def power() -> float | None:
                if index in self.instant:
                    watts = self._instant_power(handle)
                    if watts is not None:
                        return watts
                return float(nvml.nvmlDeviceGetPowerUsage(handle)) / 1000.0  # mW
            memory = probe.value(index, "memory", lambda: nvml.nvmlDeviceGetMemoryInfo(handle), errors, describe)
            energy_mj = probe.value(index, "energy", lambda: nvml.nvmlDeviceGetTotalEnergyConsumption(handle),
                                    errors, describe)
            utilisation = probe.value(index, "utilisation", lambda: nvml.nvmlDeviceGetUtilizationRates(handle),
                                      errors, describe)
            energy_count = number(energy_mj)
            readings.append(Reading(
                gpu=index,
                power_w=probe.value(index, "power", power, errors, describe),
                energy_j=energy_count / 1000.0 if energy_count is not None else None,
                memory_used_bytes=int(memory.used) if memory is not None else None,
                memory_total_bytes=int(memory.total) if memory is not None else None,
                sm_clock_mhz=number(probe.value(index, "clock", lambda: nvml.nvmlDeviceGetClockInfo(
                    handle, int(self.facts["clock"])), errors, describe)),
                temperature_c=number(probe.value(index, "temperature", lambda: nvml.nvmlDeviceGetTemperature(
                    handle, int(self.facts["temperature_sensor"])), errors, describe)),
                utilization_pct=number(getattr(utilisation, "gpu", None))))
        return readings

    def close(self) -> None:
        if self.started and self.nvml is not None:
            self.started = False
            try:
                self.nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001 - closing must not fail the run
                pass
