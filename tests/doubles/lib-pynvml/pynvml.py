"""Test double of nvidia-ml-py's pynvml module: the functions, constants and error class profilectl
calls, with the real signatures, units and failure modes (NVMLError subclasses carry `.value`).

The GPUs it shows are set by environment variables:
- FAKE_NVML_GPUS: how many (default 1); FAKE_NVML_NO_LIBRARY=1: nvmlInit fails as without the driver;
- FAKE_POWER_STEPS: the power in W as steps "W@SECONDS,W@SECONDS" from FAKE_POWER_T0 (a
  time.monotonic() value, CLOCK_MONOTONIC: the same in every process; default 0); GPU i draws the
  schedule plus 10*i W. nvmlDeviceGetTotalEnergyConsumption is the exact integral of it, in mJ,
  as the real counter (energy since the driver loaded) is;
- FAKE_NVML_INSTANT=1: the NVML_FI_DEV_POWER_INSTANT field answers (else the field returns
  NOT_SUPPORTED and nvmlDeviceGetPowerUsage is the reading); FAKE_NVML_NO_ENERGY=1: the energy
  counter is NOT_SUPPORTED (pre-Volta);
- FAKE_NVML_FAIL_AFTER=N: after N power readings in this process every call fails with
  NVML_ERROR_GPU_IS_LOST ("GPU is lost"), as when a GPU falls off the bus.
"""
import os
import time

NVML_SUCCESS = 0
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_GPU_IS_LOST = 15
NVML_CLOCK_SM = 1
NVML_TEMPERATURE_GPU = 0
NVML_FI_DEV_POWER_INSTANT = 186
NVML_VALUE_TYPE_UNSIGNED_INT = 1
_MESSAGES = {NVML_ERROR_NOT_SUPPORTED: "Not Supported", NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
             NVML_ERROR_GPU_IS_LOST: "GPU is lost"}


class NVMLError(Exception):
    def __init__(self, value):
        super().__init__(value)
        self.value = value

    def __str__(self):
        return _MESSAGES.get(self.value, f"Unknown Error {self.value}")


class NVMLError_NotSupported(NVMLError):
    def __init__(self, value=NVML_ERROR_NOT_SUPPORTED):
        super().__init__(value)


_state = {"init": 0, "power_reads": 0}


def _steps():
    steps = []
    for part in os.environ.get("FAKE_POWER_STEPS", "250").split(","):
        watts, _, start = part.partition("@")
        steps.append((float(start or 0), float(watts)))
    return sorted(steps)


def _now():
    return time.monotonic() - float(os.environ.get("FAKE_POWER_T0", "0"))


def _power(index, t):
    watts = 0.0
    for start, value in _steps():
        if t >= start:
            watts = value
    return watts + 10.0 * index


def _energy_j(index, t):
    steps = _steps() + [(max(t, 0.0), None)]
    total = 0.0
    for (start, value), (end, _) in zip(steps, steps[1:]):
        if start < t and value is not None:
            total += value * (min(end, t) - start)
    return total + 10.0 * index * max(t, 0.0)


def _check(handle=None):
    if not _state["init"]:
        raise NVMLError(1)
    limit = os.environ.get("FAKE_NVML_FAIL_AFTER")
    if limit is not None and _state["power_reads"] >= int(limit):
        raise NVMLError(NVML_ERROR_GPU_IS_LOST)


def nvmlInit():
    if os.environ.get("FAKE_NVML_NO_LIBRARY") == "1":
        raise NVMLError(NVML_ERROR_LIBRARY_NOT_FOUND)
    _state["init"] += 1


def nvmlShutdown():
    _check()
    _state["init"] -= 1


def nvmlDeviceGetCount():
    _check()
    return int(os.environ.get("FAKE_NVML_GPUS", "1"))


def nvmlDeviceGetHandleByIndex(index):
    _check()
    if not 0 <= index < nvmlDeviceGetCount():
        raise NVMLError(2)
    return ("fake-gpu", index)


def nvmlDeviceGetPowerUsage(handle):
    _check()
    _state["power_reads"] += 1
    return int(round(_power(handle[1], _now()) * 1000))  # mW


class _Value:
    def __init__(self, ui):
        self.uiVal = ui


class _Field:
    def __init__(self, field_id, ret, value):
        self.fieldId, self.scopeId, self.timestamp, self.latencyUsec = field_id, 0, 0, 0
        self.valueType, self.nvmlReturn, self.value = NVML_VALUE_TYPE_UNSIGNED_INT, ret, _Value(value)


def nvmlDeviceGetFieldValues(handle, fieldIds):
    _check()
    out = []
    for field_id in fieldIds:
        if field_id == NVML_FI_DEV_POWER_INSTANT and os.environ.get("FAKE_NVML_INSTANT") == "1":
            _state["power_reads"] += 1
            out.append(_Field(field_id, NVML_SUCCESS, int(round(_power(handle[1], _now()) * 1000))))
        else:
            out.append(_Field(field_id, NVML_ERROR_NOT_SUPPORTED, 0))
    return out


def nvmlDeviceGetTotalEnergyConsumption(handle):
    _check()
    if os.environ.get("FAKE_NVML_NO_ENERGY") == "1":
        raise NVMLError_NotSupported()
    return int(_energy_j(handle[1], _now()) * 1000)  # mJ


class _Memory:
    def __init__(self, total, used):
        self.total, self.used, self.free = total, used, total - used


def nvmlDeviceGetMemoryInfo(handle, version=None):
    _check()
    index = handle[1]
    return _Memory(80 * 2**30, (index + 1) * 2**30)


def nvmlDeviceGetClockInfo(handle, type):
    _check()
    return 1980 if type == NVML_CLOCK_SM else 2619


def nvmlDeviceGetTemperature(handle, sensor):
    _check()
    return 40 + handle[1]


class _Utilization:
    def __init__(self, gpu, memory):
        self.gpu, self.memory = gpu, memory


def nvmlDeviceGetUtilizationRates(handle):
    _check()
    return _Utilization(97, 40)
