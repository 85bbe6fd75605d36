"""Running a service: plan -> run directory -> run the phases -> read outputs -> summary.

Whatever happens after the run directory exists (workload failure, profiler abort, timeout, Ctrl-C,
unreadable output), the manifest is rewritten at the end with the status, and the files belong to
the host user.
"""

from __future__ import annotations

import csv
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profilectl import __version__, errors, runs
from profilectl.backends import BACKENDS, Collected
from profilectl.formats import FormatError
from profilectl.plan import Plan, make_plan
from profilectl.probe.diagnose import diagnose
from profilectl.probe.machine import Machine
from profilectl.probe.report import EnvReport
from profilectl.report import summary
from profilectl.request import Request
from profilectl.runner import Runner

COUNTER_LIST_TIMEOUT_S = 60.0


@dataclass
class Outcome:
    exit_code: int
    status: str
    message: str
    run_dir: Path | None
    manifest: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)


def list_counters(argv: list[str]) -> str | None:
    result = Machine().run(argv, timeout_s=COUNTER_LIST_TIMEOUT_S)
    return result.output if result.ok else None


def dry_run(request: Request, env: EnvReport, traces_root: Path) -> Plan:
    return make_plan(request, env, runs.proposed_run_dir(traces_root, request.service))


def run(request: Request, env: EnvReport, traces_root: Path, echo=(None, None)) -> Outcome:
    # Plan before creating the directory: an unavailable capability or a bad counter name leaves
    # no empty run directory behind. The name is claimed with exclusive creation; in the unlikely
    # event that another run took it meanwhile, plan again for a fresh name (counters validated once).
    run_dir = runs.proposed_run_dir(traces_root, request.service)
    plan = make_plan(request, env, run_dir, list_counters=list_counters)
    for _ in range(runs.CLAIM_ATTEMPTS):
        if runs.claim(run_dir):
            break
        run_dir = runs.proposed_run_dir(traces_root, request.service)
        notes, plan = plan.notes, make_plan(request, env, run_dir)
        plan.notes = notes
    else:
        raise errors.UsageError(f"could not create a unique run directory in {traces_root}")
    owner = runs.host_owner(traces_root)
    started = runs.now_utc()
    manifest = _manifest(plan, env, started)
    runs.write_json_atomic(run_dir / "env.json", env.to_dict())
    runs.write_json_atomic(run_dir / "manifest.json", manifest)
    runs.hand_over(run_dir, owner)

    collected: list[tuple[str, Collected]] = []
    results = []
    phase_rcs: list[tuple[str, int | None]] = []
    with Runner(run_dir, *echo, timeout_s=request.timeout_s) as runner:
        for phase in plan.phases:
            raw = run_dir / phase.raw_dir
            raw.mkdir(parents=True, exist_ok=True)
            for relative, text in phase.input_files.items():
                (run_dir / relative).write_text(text)
            phase_results = [runner.run(step, phase.environment) for step in phase.steps]
            results.extend(phase_results)
            failed = next((r for r in phase_results if r.returncode not in (0, None)), None)
            phase_rcs.append((phase.backend, failed.returncode if failed else
                              (None if any(r.returncode is None for r in phase_results) else 0)))
            try:
                collected.append((phase.backend, BACKENDS[phase.backend].collect(raw, request, phase_results)))
            except FormatError as exc:
                collected.append((phase.backend, Collected(produced_output=False, notes=[str(exc)])))
            if runner.interrupted or runner.timed_out or failed:
                break
        interrupted, timed_out = runner.interrupted, runner.timed_out

    stderr_text = _tail(run_dir / "stderr.log")
    status, exit_code, message = _verdict(plan, phase_rcs, collected, interrupted, timed_out,
                                          stderr_text, request)
    summary = _write_tables_and_summary(run_dir, plan, collected, status)
    finished = runs.now_utc()
    manifest.update({
        "status": status, "exit_code": exit_code, "message": message,
        "finished_at": runs.iso(finished), "wall_seconds": round((finished - started).total_seconds(), 3),
        "steps": [{"label": r.label, "exit_code": r.returncode, "seconds": round(r.seconds, 6)} for r in results],
        "perfetto_trace": summary.get("perfetto_trace"),
        "notes": plan.notes + [n for _, c in collected for n in c.notes],
    })
    # Written twice so the manifest lists itself with its final size.
    for _ in range(2):
        manifest["outputs"] = runs.output_files(run_dir)
        runs.write_json_atomic(run_dir / "manifest.json", manifest)
    runs.hand_over(run_dir, owner)
    return Outcome(exit_code, status, message, run_dir, manifest, summary)


def _manifest(plan: Plan, env: EnvReport, started) -> dict[str, Any]:
    return {
        "schema_version": runs.MANIFEST_SCHEMA,
        "profilectl_version": __version__,
        "service": plan.service,
        "backend": plan.backend,
        "reason": plan.reason,
        "fallbacks": plan.fallbacks,
        "tool": plan.tool,
        "argv": plan.phases[0].steps[0].argv if plan.phases and plan.phases[0].steps else [],
        "phases": [{"backend": p.backend, "raw_dir": p.raw_dir, "environment": p.environment,
                    "argv": [s.argv for s in p.steps]} for p in plan.phases],
        "workload": plan.workload,
        "workload_source": plan.workload_source,
        "counter_set": plan.counter_set,
        "gpu": env.gpus[0].__dict__ if env.gpus else None,
        "started_at": runs.iso(started),
        "finished_at": None,
        "wall_seconds": None,
        "exit_code": None,
        "status": "running",
        "outputs": [],
    }


def _tail(path: Path, limit: int = 200_000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def _verdict(plan: Plan, phase_rcs, collected, interrupted, timed_out, stderr_text, request):
    main_backend = phase_rcs[0][0] if phase_rcs else plan.backend
    if interrupted:
        name = signal.Signals(interrupted).name
        return "interrupted", errors.INTERRUPTED, f"interrupted by {name}; partial outputs kept"
    if timed_out:
        return "timeout", errors.TIMEOUT, f"stopped after the {request.timeout_s:g} s timeout; partial outputs kept"
    failed = next(((b, rc) for b, rc in phase_rcs if rc not in (0, None)), None)
    if failed:
        backend, rc = failed
        is_profiler = BACKENDS[backend].is_profiler
        found = diagnose(stderr_text, rc) if is_profiler else None
        if found:
            return "failed", errors.PROFILER_FAILED, f"{backend} failed: {found.reason}. Fix: {found.fix}"
        if is_profiler and rc is not None and rc < 0:
            return "failed", errors.PROFILER_FAILED, f"{backend} was killed by signal {-rc}"
        return "failed", errors.WORKLOAD_FAILED, f"the workload exited with code {rc} (under {backend})"
    main = collected[0][1] if collected else None
    if main is None or not main.produced_output:
        why = "; ".join(main.notes) if main and main.notes else "no kernels or records were written"
        return "no-output", errors.PROFILER_FAILED, f"{main_backend} ran but produced no readable output: {why}"
    return "ok", errors.OK, "ok"


def _write_csv(path: Path, rows: list[dict]) -> None:
    columns = list(dict.fromkeys(key for row in rows for key in row))
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def _write_tables_and_summary(run_dir: Path, plan: Plan, collected, status: str) -> dict[str, Any]:
    tables: dict[str, list[dict]] = {}
    trace = None
    for backend, result in collected:
        for name, rows in result.tables.items():
            key = name if backend == plan.backend or name not in tables else f"{backend}_{name}"
            tables[key] = rows
        trace = trace or result.trace_file
    derived = (plan.counter_set or {}).get("derived") or {}
    if "counters" in tables:
        tables["counters_by_kernel"] = summary.counters_by_kernel(tables["counters"], derived)
    for name, rows in tables.items():
        if rows:
            _write_csv(run_dir / f"{name}.csv", rows)
    result = summary.build(tables, {"kind": "profilectl-run", "path": str(run_dir)}, derived, perfetto_trace=trace)
    result["status"] = status
    runs.write_json_atomic(run_dir / "summary.json", result)
    return result
