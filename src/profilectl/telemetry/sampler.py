"""The background sampler: one thread in profilectl's process reads the GPUs every interval while the
run's steps execute, and appends one row per GPU to telemetry.csv in the run directory.

- It never stops the run: a source that cannot start, or breaks mid-run (a lost GPU, a full disk),
  ends the sampling only, with a note ("power sampling stopped after N s: <reason>").
- telemetry.csv holds complete rows only: every sweep is one write of whole lines; a write the disk
  could not take whole is cut back to the last complete row. Rows reach the file as they are taken
  (a killed profilectl leaves what it had), and the file is synced when sampling stops.
- `stop()` is called on every ending (execute.run's finally): the thread is told to stop, a command
  under way is killed, the thread is joined and the source closed. A source call that hangs (a GPU
  that stopped answering) is waited for STOP_WAIT_S at most; the thread is then left to end with
  profilectl (it is a daemon and writes nothing more).
"""

from __future__ import annotations

import errno
import os
import threading
import time
from pathlib import Path

from profilectl.telemetry.energy import summarise_file
from profilectl.telemetry.model import CSV_COLUMNS, CSV_NAME, PowerSummary, Reading, SamplingPlan, SourceSpec
from profilectl.telemetry.source import GpuReadings, SourceError

STOP_WAIT_S = 5.0


def make_source(spec: SourceSpec, gpus: tuple[int, ...]) -> GpuReadings:
    if spec.name == "nvml":
        from profilectl.telemetry.nvml import NvmlSource
        return NvmlSource(gpus)
    from profilectl.telemetry import amdsmi
    if spec.name == "amdsmi":
        return amdsmi.AmdSmiLibrary(gpus)
    if spec.name == "amd-smi" and spec.path:
        return amdsmi.AmdSmiCommand(spec.name, spec.path, gpus)
    if spec.name == "rocm-smi" and spec.path:
        return amdsmi.RocmSmiCommand(spec.name, spec.path, gpus)
    raise SourceError(f"unknown telemetry source {spec.name!r}")


def _cell(value: float | int | str | None) -> str:
    if value is None:
        return ""
    return repr(value) if isinstance(value, float) else str(value)  # repr: the shortest exact float


def rows_text(timestamp_ns: int, monotonic_ns: int, source: str, readings: list[Reading]) -> bytes:
    return "".join(",".join(_cell(v) for v in (
        timestamp_ns, monotonic_ns, r.gpu, source, r.power_w, r.energy_j, r.memory_used_bytes, r.memory_total_bytes,
        r.sm_clock_mhz, r.temperature_c, r.utilization_pct)) + "\n" for r in readings).encode()


class Sampler:
    """Samples the plan's GPUs from the first source that starts. `Sampler.start(None, ...)` (no
    plan: --no-sample, no GPU, no source) samples nothing and stops as cheaply."""

    def __init__(self, plan: SamplingPlan | None, run_dir: Path):
        self.plan = plan
        self.path = run_dir / (plan.file if plan else CSV_NAME)
        self.notes: list[str] = []
        self.source: GpuReadings | None = None
        self.rows = 0
        self.sweeps = 0
        self.cpu_seconds = 0.0  # the sampling thread's own CPU time (bench/sampler_overhead.py)
        self._thread: threading.Thread | None = None
        self._halt = threading.Event()
        self._lock = threading.Lock()  # the file descriptor, between the thread and stop()
        self._fd: int | None = None
        self._started_at = 0.0
        self._failure: str | None = None
        self._stopped = False
        self._summary: PowerSummary | None = None

    @classmethod
    def start(cls, plan: SamplingPlan | None, run_dir: Path) -> "Sampler":
        sampler = cls(plan, run_dir)
        if plan is not None:
            try:
                sampler._start(plan)
            except Exception as exc:  # noqa: BLE001 - a bug here must cost the sampling, not the run
                sampler.notes.append(f"power sampling not started: {type(exc).__name__}: {exc}")
                sampler._close_file()
                sampler.path.unlink(missing_ok=True)  # a header alone is no sample
                if sampler.source is not None:  # the GPU library is shut down again
                    sampler.source.close()
                    sampler.source = None
        return sampler

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _start(self, plan: SamplingPlan) -> None:
        for spec in plan.sources:
            source = make_source(spec, plan.gpus)
            try:
                source.open()
            except SourceError as exc:
                self.notes.append(f"power sampling: {spec.name} did not start: {exc}")
                source.close()
                continue
            except BaseException:
                source.close()
                raise
            self.source = source
            break
        if self.source is None:
            return
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o666)
            self._write((",".join(CSV_COLUMNS) + "\n").encode())
        except OSError as exc:
            self.notes.append(f"power sampling not started: cannot write {self.path.name}: {exc.strerror or exc}")
            self._close_file()
            self.path.unlink(missing_ok=True)
            self.source.close()
            self.source = None
            return
        self._started_at = time.monotonic()
        self._thread = threading.Thread(target=self._run, args=(self.source, plan.interval_s),
                                        name="profilectl-sampler", daemon=True)
        self._thread.start()

    def _run(self, source: GpuReadings, interval_s: float) -> None:
        next_at = time.monotonic()
        try:
            while True:
                final = self._halt.is_set()  # stop() asked: one last sweep closes the window
                if final and not source.final_sweep:
                    return
                began = time.monotonic()
                wall, mono = time.time_ns(), time.monotonic_ns()
                try:
                    readings = source.read()
                    # the sweep's time: the middle of the read (a command's takes a fraction of a second)
                    half = (time.monotonic_ns() - mono) // 2
                    wall, mono = wall + half, mono + half
                except SourceError as exc:
                    self._fail(str(exc))
                    return
                except Exception as exc:  # noqa: BLE001 - the library's own failure ends the sampling only
                    self._fail(f"{type(exc).__name__}: {exc}")
                    return
                if readings and not self._append(rows_text(wall, mono, source.name, readings), len(readings)):
                    return
                if final:
                    return
                # every interval; a command source also waits a multiple of its own call's duration
                next_at = max(next_at + interval_s, began + source.call_seconds)
                now = time.monotonic()
                next_at = max(next_at, now)  # a late sweep is not caught up in a burst
                self._halt.wait(next_at - now)
        finally:
            self.cpu_seconds = time.thread_time()

    def _fail(self, reason: str) -> None:
        if not self._halt.is_set():  # a command killed by stop() is not a failure
            elapsed = time.monotonic() - self._started_at
            self._failure = f"power sampling stopped after {elapsed:.1f} s: {reason}"

    def _append(self, text: bytes, rows: int) -> bool:
        with self._lock:
            if self._fd is None:
                return False
            try:
                self._write(text)
            except OSError as exc:
                full = " (the disk is full)" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else ""
                self._fail(f"cannot write {self.path.name}: {exc.strerror or exc}{full}")
                return False
            self.rows += rows
            self.sweeps += 1
            return True

    def _write(self, text: bytes) -> None:
        """All of `text`, or nothing: a short write is cut back to where it began."""
        assert self._fd is not None
        begin = os.lseek(self._fd, 0, os.SEEK_END)
        view = memoryview(text)
        try:
            while view:
                view = view[os.write(self._fd, view):]
        except OSError:
            try:
                os.ftruncate(self._fd, begin)
            except OSError:
                pass
            raise

    def _close_file(self) -> None:
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.fsync(fd)
            except OSError:
                pass
            os.close(fd)

    def stop(self) -> PowerSummary | None:
        """Stop sampling (idempotent: safe to call again after a signal interrupted a first call)
        and summarise what was sampled."""
        if self._stopped:
            return self._summary
        self._halt.set()
        source, thread = self.source, self._thread
        if source is not None:
            source.cancel()
        hung = False
        if thread is not None:
            thread.join(STOP_WAIT_S)
            hung = thread.is_alive()
        self._close_file()
        if source is not None and not hung:
            source.close()
        self._stopped = True
        if hung:
            self.notes.append(f"power sampling: {source.name if source else 'the source'} did not answer within "
                              f"{STOP_WAIT_S:g} s of the end; its thread was left to end with profilectl")
        if self._failure:
            self.notes.append(self._failure)
        if self.rows and source is not None:
            try:
                self._summary = summarise_file(self.path, source.power_reading)
            except (OSError, ValueError) as exc:
                self.notes.append(f"power summary left out: {self.path.name}: {exc}")
        return self._summary
