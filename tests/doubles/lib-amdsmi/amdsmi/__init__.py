"""Test double of AMD SMI's Python library (`amdsmi`, as ROCm ships it): the calls profilectl makes,
with their names, arguments, units and exceptions (facts and sources in profiling/telemetry.yaml).

- FAKE_SMI_GPUS: how many GPUs; FAKE_POWER_STEPS / FAKE_POWER_T0: the power schedule, as for the
  command doubles; amdsmi_get_energy_count's accumulator times counter_resolution (uJ) is its integral;
- FAKE_AMDSMI_NO_DRIVER=1: amdsmi_init raises, as without the amdgpu driver;
- FAKE_AMDSMI_FAIL_AFTER=N: after N power readings every call raises (a GPU lost mid-run).
"""
import os
import time
from enum import IntEnum

RESOLUTION_UJ = 15.3
_state = {"init": False, "power_reads": 0}


class AmdSmiException(Exception):
    pass


class AmdSmiLibraryException(AmdSmiException):
    def __init__(self, code):
        super().__init__(code)
        self.err_code = code

    def get_error_code(self):
        return self.err_code

    def __str__(self):
        return {8: "AMDSMI_STATUS_NOT_INIT - Device not initialized", 2: "AMDSMI_STATUS_NOT_SUPPORTED - Feature not supported",
                49: "AMDSMI_STATUS_DRIVER_NOT_LOADED - Driver not loaded"}.get(self.err_code, f"status {self.err_code}")


class AmdSmiInitFlags(IntEnum):
    INIT_ALL_PROCESSORS = 0xFFFFFFFF
    INIT_AMD_CPUS = 1 << 0
    INIT_AMD_GPUS = 1 << 1


class AmdSmiMemoryType(IntEnum):
    VRAM = 0
    VIS_VRAM = 1
    GTT = 2


class AmdSmiClkType(IntEnum):
    SYS = 0
    GFX = 0
    DF = 1
    MEM = 4


class AmdSmiTemperatureType(IntEnum):
    EDGE = 0
    HOTSPOT = 1
    JUNCTION = 1
    VRAM = 2


class AmdSmiTemperatureMetric(IntEnum):
    CURRENT = 0


class _Handle:
    def __init__(self, index):
        self.index = index


def _steps():
    return sorted((float(start or 0), float(watts)) for watts, _, start in
                  (part.partition("@") for part in os.environ.get("FAKE_POWER_STEPS", "250").split(",")))


def _t():
    return time.monotonic() - float(os.environ.get("FAKE_POWER_T0", "0"))


def _power(index, t):
    watts = 0.0
    for start, value in _steps():
        if t >= start:
            watts = value
    return watts + 10.0 * index


def _energy_j(index, t):
    schedule = _steps()
    total = 0.0
    for k, (start, watts) in enumerate(schedule):
        end = schedule[k + 1][0] if k + 1 < len(schedule) else t
        if start < t:
            total += watts * (min(end, t) - start)
    return total + 10.0 * index * max(t, 0.0)


def _check():
    if not _state["init"]:
        raise AmdSmiLibraryException(8)
    limit = os.environ.get("FAKE_AMDSMI_FAIL_AFTER")
    if limit is not None and _state["power_reads"] >= int(limit):
        raise AmdSmiLibraryException(49)


def amdsmi_init(flag=AmdSmiInitFlags.INIT_AMD_GPUS):
    if os.environ.get("FAKE_AMDSMI_NO_DRIVER") == "1":
        raise AmdSmiLibraryException(49)
    _state["init"] = True


def amdsmi_shut_down():
    _check()
    _state["init"] = False


def amdsmi_get_processor_handles():
    _check()
    return [_Handle(i) for i in range(int(os.environ.get("FAKE_SMI_GPUS", "1")))]


def amdsmi_get_power_info(processor_handle):
    _check()
    _state["power_reads"] += 1
    watts = int(_power(processor_handle.index, _t()))
    return {"socket_power": watts, "current_socket_power": watts, "average_socket_power": "N/A",
            "gfx_voltage": "N/A", "soc_voltage": "N/A", "mem_voltage": "N/A", "power_limit": 750000000}


def amdsmi_get_energy_count(processor_handle):
    _check()
    accumulator = int(_energy_j(processor_handle.index, _t()) * 1e6 / RESOLUTION_UJ)
    return {"power": accumulator, "energy_accumulator": accumulator, "counter_resolution": RESOLUTION_UJ,
            "timestamp": time.time_ns()}


def amdsmi_get_gpu_memory_usage(processor_handle, mem_type):
    _check()
    return (processor_handle.index + 1) * 2**30


def amdsmi_get_gpu_memory_total(processor_handle, mem_type):
    _check()
    return 192 * 2**30


def amdsmi_get_clock_info(processor_handle, clock_type):
    _check()
    return {"clk": 2100, "min_clk": 500, "max_clk": 2100, "clk_locked": False, "clk_deep_sleep": 0}


def amdsmi_get_temp_metric(processor_handle, sensor_type, metric):
    _check()
    if sensor_type == AmdSmiTemperatureType.EDGE:
        raise AmdSmiLibraryException(2)  # MI300: no edge sensor
    return 55 + processor_handle.index


def amdsmi_get_gpu_activity(processor_handle):
    _check()
    return {"gfx_activity": 97, "umc_activity": 40, "mm_activity": "N/A"}
