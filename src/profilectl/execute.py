"""execute(plan) -> Outcome: the run directory, the processes, the tables and the summary.

Whatever happens after the run directory exists (workload failure, profiler abort, timeout, Ctrl-C,
unreadable output), the manifest is rewritten at the end with the status, and the files belong to
the host user.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import signal
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Iterable

from profilectl import __version__, errors, runs
from profilectl.backends import BACKENDS, StepResult
from profilectl.envreport import EnvReport
from profilectl.errors import FormatError
from profilectl.files import write_atomic, write_json_atomic
from profilectl.formats.tables import Tables, merge_all
from profilectl.manifest import MANIFEST_SCHEMA, Controller, Manifest, PhaseRecord, StepRecord
from profilectl.plan import Plan, relocate
from profilectl.probe.diagnose import diagnose
from profilectl.probe.machine import Machine
from profilectl.report import summary as summaries
from profilectl.report.summary import SourceInfo, Summary
from profilectl.runner import Runner

COUNTER_LIST_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Outcome:
    exit_code: int
    status: str
    message: str
    run_dir: Path
    manifest: Manifest
    summary: Summary


@dataclass(frozen=True)
class PhaseOutcome:
    backend: str
    returncode: int | None  # the first failing step's code, 0 when all passed, None when not run
    tables: Tables
    read_error: str | None = None


def list_counters(argv: list[str]) -> str | None:
    """Runs a backend's counter-listing command (for validating names before a run)."""
    result = Machine().run(argv, timeout_s=COUNTER_LIST_TIMEOUT_S)
    return result.output if result.ok else None


def boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def start_manifest(plan: Plan, report: EnvReport, started: str) -> Manifest:
    return Manifest(
        schema_version=MANIFEST_SCHEMA, profilectl_version=__version__, service=plan.service, backend=plan.backend,
        reason=plan.reason, fallbacks=plan.fallbacks, tool=plan.tool, argv=plan.argv,
        phases=tuple(PhaseRecord(backend=p.backend, raw_dir=p.raw_dir, environment=p.environment,
                                 argv=tuple(s.argv for s in p.steps)) for p in plan.phases),
        workload=plan.workload, workload_source=plan.workload_source, counter_set=plan.counter_set,
        gpu=report.facts.gpus[0] if report.facts.gpus else None, started_at=started,
        controller=Controller(pid=os.getpid(), hostname=socket.gethostname(), boot_id=boot_id()),
        notes=plan.notes)


def run(plan: Plan, report: EnvReport, echo: tuple[BinaryIO | None, BinaryIO | None] = (None, None)) -> Outcome:
    proposed = Path(plan.run_dir)
    run_dir = runs.create_run_dir(proposed.parent, plan.service, first=proposed)
    if run_dir != proposed:  # the proposed name was taken meanwhile: same decisions, new paths
        plan = relocate(plan, report.facts, run_dir)
    owner = runs.host_owner(run_dir.parent)
    started = runs.now_utc()
    manifest = start_manifest(plan, report, runs.iso(started))
    write_json_atomic(run_dir / "env.json", report.to_dict())
    manifest.write(run_dir)
    runs.hand_over(run_dir, owner)

    phases: list[PhaseOutcome] = []
    results: list[StepResult] = []
    with Runner(run_dir, *echo, timeout_s=plan.request.timeout_s) as runner:
        for phase in plan.phases:
            backend = BACKENDS[phase.backend]
            raw = run_dir / phase.raw_dir
            raw.mkdir(parents=True, exist_ok=True)
            for relative, text in phase.input_files.items():
                (run_dir / relative).write_text(text)
            phase_results = [runner.run(step, phase.environment) for step in phase.steps]
            results.extend(phase_results)
            failed = next((r for r in phase_results if r.returncode not in (0, None)), None)
            returncode = failed.returncode if failed else (None if any(r.returncode is None for r in phase_results) else 0)
            backend.record(raw, phase_results)
            try:
                phases.append(PhaseOutcome(phase.backend, returncode, backend.read(raw)))
            except FormatError as exc:
                phases.append(PhaseOutcome(phase.backend, returncode, Tables(), read_error=str(exc)))
            if runner.interrupted or runner.timed_out or failed:
                break
        interrupted, timed_out = runner.interrupted, runner.timed_out

    status, exit_code, message = _verdict(plan, phases, interrupted, timed_out, _tail(run_dir / "stderr.log"))
    summary = _write_tables_and_summary(run_dir, plan, phases, status)
    finished = runs.now_utc()
    manifest = dataclasses.replace(
        manifest, status=status, exit_code=exit_code, message=message, finished_at=runs.iso(finished),
        wall_seconds=round((finished - started).total_seconds(), 3),
        steps=tuple(StepRecord(label=r.label, exit_code=r.returncode, seconds=round(r.seconds, 6)) for r in results),
        perfetto_trace=summary.perfetto_trace,
        notes=plan.notes + tuple(p.read_error for p in phases if p.read_error) + summary.notes)
    # Written twice so the manifest lists itself with its final size.
    for _ in range(2):
        manifest = dataclasses.replace(manifest, outputs=runs.output_files(run_dir))
        manifest.write(run_dir)
    runs.hand_over(run_dir, owner)
    return Outcome(exit_code, status, message, run_dir, manifest, summary)


def _tail(path: Path, limit: int = 200_000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def _verdict(plan: Plan, phases: list[PhaseOutcome], interrupted: int | None, timed_out: bool,
             stderr_text: str) -> tuple[str, int, str]:
    main_backend = phases[0].backend if phases else plan.backend
    if interrupted:
        name = signal.Signals(interrupted).name
        return "interrupted", errors.INTERRUPTED, f"interrupted by {name}; partial outputs kept"
    if timed_out:
        return "timeout", errors.TIMEOUT, \
            f"stopped after the {plan.request.timeout_s:g} s timeout; partial outputs kept"
    failed = next((p for p in phases if p.returncode not in (0, None)), None)
    if failed:
        rc = failed.returncode
        is_profiler = BACKENDS[failed.backend].is_profiler
        found = diagnose(stderr_text, rc) if is_profiler else None
        if found:
            return "failed", errors.PROFILER_FAILED, f"{failed.backend} failed: {found.reason}. Fix: {found.fix}"
        if is_profiler and rc is not None and rc < 0:
            return "failed", errors.PROFILER_FAILED, f"{failed.backend} was killed by signal {-rc}"
        return "failed", errors.WORKLOAD_FAILED, f"the workload exited with code {rc} (under {failed.backend})"
    main = phases[0] if phases else None
    if main is None or not main.tables.has_data:
        why = main.read_error if main and main.read_error else "no kernels or records were written"
        return "no-output", errors.PROFILER_FAILED, f"{main_backend} ran but produced no readable output: {why}"
    return "ok", errors.OK, "ok"


def _write_csv(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    rows = list(rows)
    if not rows:
        return
    columns = list(dict.fromkeys(key for row in rows for key in row))

    def write(fh: Any) -> None:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    write_atomic(path, write)


def _relative(run_dir: Path, path: str) -> str:
    try:
        return str(Path(path).relative_to(run_dir))
    except ValueError:
        return path


def _write_tables_and_summary(run_dir: Path, plan: Plan, phases: list[PhaseOutcome], status: str) -> Summary:
    tables = merge_all(p.tables for p in phases)
    derived = plan.counter_set.derived if plan.counter_set else {}
    traces = [_relative(run_dir, t) for p in phases for t in p.tables.trace_files]
    summary = summaries.build(tables, SourceInfo(kind="profilectl-run", path=str(run_dir)), derived,
                              perfetto_trace=traces[0] if traces else None)
    if len(traces) > 1:
        summary = dataclasses.replace(summary, notes=summary.notes + (
            f"{len(traces)} Perfetto traces (one per process or phase); the first is {traces[0]}",))
    for name, rows in (("kernels", summary.kernels), ("api", summary.api), ("memory_copies", summary.memory_copies),
                       ("operators", summary.operators)):
        _write_csv(run_dir / f"{name}.csv", (dataclasses.asdict(r) for r in rows))
    _write_csv(run_dir / "counters.csv", (dataclasses.asdict(c) for c in tables.counters))
    _write_csv(run_dir / "counters_by_kernel.csv", summary.counters_by_kernel)
    _write_csv(run_dir / "timing.csv", ({"run": i + 1, "seconds": s} for i, s in enumerate(tables.timing_s)))
    summary = dataclasses.replace(summary, status=status)
    summary.write(run_dir / "summary.json")
    return summary
