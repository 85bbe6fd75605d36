"""AMD GPUs: AMD SMI's Python library (`amdsmi`) in profilectl's own process where it imports, else
one `amd-smi metric --json` call per sweep, else `rocm-smi --json`. Names, keys and units:
profiling/telemetry.yaml.

A command call starts a Python interpreter and the SMI library each time (a fraction of a second),
so command sources space their calls: at least COMMAND_SPACING times the last call's duration
between two calls, keeping the command at most ~1/COMMAND_SPACING of one core. Each call runs in
a session of its own (a Ctrl-C meant for the workload does not reach it) with an argv list, and is
killed when the sampler stops or after CALL_TIMEOUT_S.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import signal
import subprocess
import threading
import time
from typing import Any

from profilectl.telemetry.model import Reading
from profilectl.telemetry.plan import source_facts
from profilectl.telemetry.source import Probe, GpuReadings, SourceError, number

CALL_TIMEOUT_S = 10.0
COMMAND_SPACING = 4.0  # wait 3x a call's own duration before the next: the command uses <= ~25 % of a core


class AmdSmiLibrary(GpuReadings):
    name = "amdsmi"
    power_reading = "amdsmi_get_power_info: current socket power where the GPU reports it, else the average"

    def __init__(self, gpus: tuple[int, ...] = ()):
        self.wanted = gpus
        self.facts = source_facts("amdsmi")
        self.lib: Any = None
        self.handles: list[tuple[int, Any]] = []
        self.probe = Probe()
        self.started = False

    def open(self) -> None:
        try:
            self.lib = importlib.import_module(self.facts["module"])
        except ImportError as exc:
            raise SourceError(f"cannot import {self.facts['module']}: {exc}") from None
        lib = self.lib
        try:
            lib.amdsmi_init(lib.AmdSmiInitFlags.INIT_AMD_GPUS)
            self.started = True
            handles = list(lib.amdsmi_get_processor_handles())
        except lib.AmdSmiException as exc:
            self.close()
            raise SourceError(f"amdsmi: {exc}") from None
        self.handles = [(i, h) for i, h in enumerate(handles) if not self.wanted or i in self.wanted]
        if not self.handles:
            self.close()
            raise SourceError(f"amdsmi sees {len(handles)} GPU(s), none of {', '.join(map(str, self.wanted))}")
        self.read()
        self.probe.learning = False

    def read(self) -> list[Reading]:
        lib, facts, probe = self.lib, self.facts, self.probe
        errors = (lib.AmdSmiException, KeyError, TypeError, ValueError)

        def describe(exc: BaseException) -> str:
            return f"amdsmi: {exc}"
        vram = getattr(lib.AmdSmiMemoryType, facts["memory"])
        readings = []
        for index, handle in self.handles:
            def power() -> float | None:
                info = lib.amdsmi_get_power_info(handle)
                return next((number(info[k]) for k in facts["power_keys"] if number(info.get(k)) is not None), None)

            def energy() -> float | None:
                count = lib.amdsmi_get_energy_count(handle)
                raw = next((number(count[k]) for k in facts["energy_keys"] if number(count.get(k)) is not None), None)
                resolution = number(count.get("counter_resolution"))
                return raw * resolution / 1e6 if raw is not None and resolution is not None else None  # uJ -> J

            def temperature() -> float | None:
                for sensor in facts["temperature_sensors"]:
                    try:
                        return number(lib.amdsmi_get_temp_metric(handle, getattr(lib.AmdSmiTemperatureType, sensor),
                                                                 lib.AmdSmiTemperatureMetric.CURRENT))
                    except lib.AmdSmiException:
                        continue
                raise lib.AmdSmiException("no temperature sensor answers")

            used = probe.value(index, "memory", lambda: lib.amdsmi_get_gpu_memory_usage(handle, vram), errors, describe)
            total = probe.value(index, "memory total", lambda: lib.amdsmi_get_gpu_memory_total(handle, vram),
                                errors, describe)
            clock = probe.value(index, "clock", lambda: lib.amdsmi_get_clock_info(
                handle, getattr(lib.AmdSmiClkType, facts["clock"])).get("clk"), errors, describe)
            activity = probe.value(index, "utilisation", lambda: lib.amdsmi_get_gpu_activity(handle).get(
                facts["activity_key"]), errors, describe)
            used_bytes, total_bytes = number(used), number(total)
            readings.append(Reading(
                gpu=index, power_w=probe.value(index, "power", power, errors, describe),
                energy_j=probe.value(index, "energy", energy, errors, describe),
                memory_used_bytes=int(used_bytes) if used_bytes is not None else None,
                memory_total_bytes=int(total_bytes) if total_bytes is not None else None,
                sm_clock_mhz=number(clock), temperature_c=probe.value(index, "temperature", temperature, errors, describe),
                utilization_pct=number(activity)))
        return readings

    def close(self) -> None:
        if self.started and self.lib is not None:
            self.started = False
            try:
                self.lib.amdsmi_shut_down()
            except Exception:  # noqa: BLE001 - closing must not fail the run
                pass


class CommandSource(GpuReadings):
    """A command printing JSON for every GPU, called once per sweep."""
    final_sweep = False  # a call takes a fraction of a second: the end of the run is not held up for it

    def __init__(self, name: str, path: str, gpus: tuple[int, ...] = ()):
        self.name = name
        self.facts = source_facts(name)
        self.path = path
        self.wanted = gpus
        self.argv: list[str] = []
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._cancelled = False
        self._last_call_s = 0.0

    @property
    def call_seconds(self) -> float:
        return self._last_call_s * COMMAND_SPACING

    def _argv(self, with_energy: bool) -> list[str]:
        argv = [self.path, *self.facts["argv"]]
        if with_energy and self.facts.get("energy_option"):
            argv.append(self.facts["energy_option"])
        if self.wanted:
            argv += [self.facts["gpu_option"], *map(str, self.wanted)]
        return argv

    def open(self) -> None:
        problem = None
        for with_energy in (True, False):  # the energy option is refused off bare-metal Linux
            self.argv = self._argv(with_energy)
            try:
                readings = self.read()
            except SourceError as exc:
                problem = problem or str(exc)
                continue
            if readings:
                return
            problem = problem or f"{self.name} printed no GPU"
        raise SourceError(problem or f"{self.name} gave nothing")

    def read(self) -> list[Reading]:
        text = self._call()
        try:
            return [r for r in self.parse(text) if not self.wanted or r.gpu in self.wanted]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise SourceError(f"{self.name} printed what is not its JSON: {exc}") from None

    def _call(self) -> str:
        started = time.monotonic()
        with self._lock:
            if self._cancelled:
                raise SourceError("stopped")
            try:
                self._process = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                 stderr=subprocess.PIPE, start_new_session=True)
            except OSError as exc:
                raise SourceError(f"cannot run {self.path}: {exc.strerror or exc}") from None
        process = self._process
        try:
            out, err = process.communicate(timeout=CALL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._kill(process)
            process.communicate()
            raise SourceError(f"{self.name} did not answer within {CALL_TIMEOUT_S:g} s") from None
        finally:
            with self._lock:
                self._process = None
        self._last_call_s = time.monotonic() - started
        if process.returncode != 0:
            last = (err.decode(errors="replace").strip().splitlines() or ["no message"])[-1]
            how = f"signal {-process.returncode}" if process.returncode < 0 else f"code {process.returncode}"
            raise SourceError(f"{self.name} exited with {how}: {last[:200]}")
        return out.decode(errors="replace")

    @staticmethod
    def _kill(process: subprocess.Popen[bytes]) -> None:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # its own session: the group is the command and its children
        except OSError:
            pass

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            if self._process is not None:
                self._kill(self._process)

    def close(self) -> None:
        self.cancel()

    def parse(self, text: str) -> list[Reading]:
        raise NotImplementedError


def _json_document(text: str) -> Any:
    """The JSON value in a command's output (warnings may come first on stdout)."""
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start < 0:
        raise ValueError("no JSON in the output")
    value, _ = json.JSONDecoder().raw_decode(text[start:])
    return value


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_SCALE = {"W": 1.0, "mW": 1e-3, "uW": 1e-6, "J": 1.0, "mJ": 1e-3, "uJ": 1e-6, "MHz": 1.0, "GHz": 1e3,
          "C": 1.0, "%": 1.0}


class AmdSmiCommand(CommandSource):
    """`amd-smi metric ... --json`: a list (or {"gpu_data": [...]}) of one object per GPU; values
    are {"value": N, "unit": U} from ROCm 6.1, plain before, "N/A" where absent."""
    power_reading = "amd-smi metric: socket power (current where the GPU reports it, else the average)"

    def parse(self, text: str) -> list[Reading]:
        doc = _json_document(text)
        if isinstance(doc, dict):
            doc = doc.get(self.facts["list_key"], [doc])
        readings = []
        for entry in doc:
            if not isinstance(entry, dict) or self.facts["gpu_key"] not in entry:
                continue
            memory_units = self.facts["memory_units"]
            used = self._first(entry, "memory_used", memory_units)
            total = self._first(entry, "memory_total", memory_units)
            readings.append(Reading(
                gpu=int(entry[self.facts["gpu_key"]]), power_w=self._first(entry, "power"),
                energy_j=self._first(entry, "energy"),
                memory_used_bytes=int(used) if used is not None else None,
                memory_total_bytes=int(total) if total is not None else None,
                sm_clock_mhz=self._first(entry, "clock"), temperature_c=self._first(entry, "temperature"),
                utilization_pct=self._first(entry, "utilisation")))
        return readings

    def _first(self, entry: dict[str, Any], metric: str, units: dict[str, float] | None = None) -> float | None:
        for path in self.facts.get(metric, []):
            value: Any = entry
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            found = _with_unit(value, units or _SCALE, default_unit=None if units is None else "MB")
            if found is not None:
                return found
        return None


def _with_unit(value: Any, scale: dict[str, float], default_unit: str | None) -> float | None:
    """{"value": 10, "unit": "W"}, 10, or "10 W" in the unit of `scale` (1.0); None for N/A."""
    unit = default_unit
    if isinstance(value, dict):
        unit = value.get("unit") or unit
        value = value.get("value")
    if isinstance(value, str):
        match = _NUMBER.search(value)
        if not match or "N/A" in value:
            return None
        unit = value[match.end():].strip() or unit
        value = float(match.group())
    amount = number(value)
    if amount is None:
        return None
    return amount * scale.get(unit, 1.0) if unit else amount


class RocmSmiCommand(CommandSource):
    """`rocm-smi ... --json`: {"card<N>": {"<name>": "<value string>"}}."""
    power_reading = "rocm-smi: current socket power where the GPU reports it, else the average"

    def parse(self, text: str) -> list[Reading]:
        doc = _json_document(text)
        prefix = self.facts["card_prefix"]
        readings = []
        for card, values in doc.items():
            if not card.startswith(prefix) or not card[len(prefix):].isdigit() or not isinstance(values, dict):
                continue
            used, total = self._first(values, "memory_used"), self._first(values, "memory_total")
            energy_uj = self._first(values, "energy_uj")
            readings.append(Reading(
                gpu=int(card[len(prefix):]), power_w=self._first(values, "power"),
                energy_j=energy_uj / 1e6 if energy_uj is not None else None,
                memory_used_bytes=int(used) if used is not None else None,
                memory_total_bytes=int(total) if total is not None else None,
                sm_clock_mhz=self._first(values, "clock"), temperature_c=self._first(values, "temperature"),
                utilization_pct=self._first(values, "utilisation")))
        return sorted(readings, key=lambda r: r.gpu)

    def _first(self, values: dict[str, Any], metric: str) -> float | None:
        for key in self.facts.get(metric, []):
            text = values.get(key)
            if isinstance(text, (int, float)) and not isinstance(text, bool):
                return float(text)
            match = _NUMBER.search(text) if isinstance(text, str) and "N/A" not in text else None
            if match:
                return float(match.group())
        return None
