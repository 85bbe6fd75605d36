"""execute(plan) -> Outcome: the run directory, the processes, the tables and the summary.

Whatever happens after the run directory exists (workload failure, profiler abort, timeout, Ctrl-C,
unreadable output, a full disk, a bug in profilectl), the manifest is rewritten at the end with the
status, and the files belong to the host user.
"""

from __future__ import annotations

import csv
import dataclasses
import errno
import os
import re
import signal
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Iterable

from profilectl import __version__, errors, ownership, privilege, runs
from profilectl.analysis import failures
from profilectl.backends import torch_profiler
from profilectl.backends import BACKENDS, Step, StepResult
from profilectl.envreport import EnvReport
from profilectl.facts import Facts
from profilectl.errors import FormatError
from profilectl.files import write_atomic, write_json_atomic
from profilectl.model.tables import Tables, merge_all
from profilectl.launchers import LAUNCHERS
from profilectl.manifest import MANIFEST_SCHEMA, Controller, Manifest, PhaseRecord, StepRecord
from profilectl.plan import Plan, cheap_enough, relocate, sized_steps
from profilectl.probe.diagnose import diagnose
from profilectl.probe.machine import CommandResult, Machine
from profilectl.read import summary as summaries
from profilectl.read.summary import SourceInfo, Summary
from profilectl.runner import Interrupted, Runner
from profilectl.telemetry.model import PowerSummary
from profilectl.telemetry.sampler import Sampler

if TYPE_CHECKING:
    from profilectl.livewatch import LiveThread

COUNTER_LIST_TIMEOUT_S = 60.0
READ_ONLY_ERRNOS = (errno.EROFS, errno.EACCES, errno.EPERM)


@dataclass(frozen=True)
class Outcome:
    """How a run ended, as the command reports it: exit code, status, message, run folder, manifest and summary."""
    exit_code: int
    status: str
    message: str
    run_dir: Path
    manifest: Manifest
    summary: Summary


@dataclass(frozen=True)
class PhaseOutcome:
    """One phase after its steps ran: its backend, the first failing step's exit code, and the tables read from its
    output (or why they were not)."""
    backend: str
    returncode: int | None  # the first failing step's code, 0 when all passed, None when not run
    tables: Tables
    read_error: str | None = None


def list_counters(argv: list[str]) -> CommandResult:
    """Runs a backend's counter-listing command (for validating names before a run)."""
    return Machine().run(argv, timeout_s=COUNTER_LIST_TIMEOUT_S)


boot_id = runs.boot_id


def start_manifest(plan: Plan, report: EnvReport, started: str) -> Manifest:
    plan = plan.redacted()  # secrets of the workload's arguments and environment are never written
    return Manifest(
        schema_version=MANIFEST_SCHEMA, profilectl_version=__version__, service=plan.service, backend=plan.backend,
        reason=plan.reason, fallbacks=plan.fallbacks, tool=plan.tool, argv=plan.argv,
        phases=tuple(PhaseRecord(backend=p.backend, raw_dir=p.raw_dir, environment=p.environment,
                                 argv=tuple(s.argv for s in p.steps)) for p in plan.phases),
        workload=plan.workload, workload_source=plan.workload_source, counter_set=plan.counter_set,
        gpu=report.facts.gpus[0] if report.facts.gpus else None, started_at=started,
        controller=Controller(pid=os.getpid(), hostname=socket.gethostname(), boot_id=boot_id()),
        notes=plan.notes)


def run(plan: Plan, report: EnvReport, echo: tuple[BinaryIO | None, BinaryIO | None] = (None, None),
        quiet: bool = False) -> Outcome:
    """`echo`: where the workload's output and profilectl's own lines go; `quiet`: the workload's
    output to its logs only (stdout.log, stderr.log)."""
    proposed = Path(plan.run_dir)
    became, became_note = _become_owner(plan, proposed.parent)
    run_dir = runs.create_run_dir(proposed.parent, plan.service, first=proposed)
    if run_dir != proposed:  # the proposed name was taken meanwhile: same decisions, new paths
        plan = relocate(plan, report.facts, run_dir)
    owner = None if became else runs.host_owner(run_dir.parent)
    # Root writing for another user (--as-root): the run directory stays root's while it runs and is
    # handed back at the end through this descriptor, opened now. Every write in between goes through
    # /proc/<pid>/fd/<n>, the directory held open, never through its path: the user owns the folder
    # around it and could rename it and plant a link in its place (ownership.hand_back).
    run_fd = _own_run_dir(run_dir) if owner is not None and os.geteuid() == 0 and owner[0] != 0 else None
    shown_dir = run_dir
    if run_fd is not None:
        run_dir = Path(f"/proc/{os.getpid()}/fd/{run_fd}")
        plan = relocate(plan, report.facts, run_dir)
    started = runs.now_utc()
    manifest = start_manifest(plan, report, runs.iso(started))
    if became_note:
        manifest = dataclasses.replace(manifest, notes=manifest.notes + (became_note,))
    if run_dir != shown_dir:
        manifest = dataclasses.replace(manifest, notes=manifest.notes + (
            f"root wrote this run through {run_dir} (the folder held open: {shown_dir} lies in a folder uid "
            f"{owner[0] if owner else '?'} controls) and handed it back to that user at the end",))

    def first_files() -> None:
        write_json_atomic(run_dir / "env.json", report.to_dict())
        manifest.write(run_dir)
    try:
        guard = runs.open_run(run_dir, first_files)  # a full disk ends here, before anything ran
    except BaseException:
        if run_fd is not None:
            os.close(run_fd)
        raise
    try:
        with Runner(run_dir, *echo, timeout_s=plan.request.timeout_s, redact=plan.request.redact,
                    quiet=quiet) as runner:
            sampler = Sampler.start(plan.sampling, run_dir)  # GPU power and memory while the steps run
            live = _start_live(run_dir, echo[1]) if plan.request.live else None
            try:
                ending = _run_and_read(plan, report.facts, run_dir, runner, sampler, live)
            finally:
                sampler.stop()  # on every ending; normally stopped already, when the steps ended
                live_notes = live.stop() if live is not None else []
            ending.notes += tuple(n for n in sampler.notes if n not in ending.summary.notes) + tuple(live_notes)
            manifest = _finish(run_dir, guard, manifest, started, ending)  # signals only recorded now
    finally:
        guard.close()  # after the final manifest: never `running` and unlocked while profilectl lives
        if run_fd is not None and owner is not None:
            try:
                ownership.hand_back(run_fd, owner, label=str(run_dir))
            finally:
                os.close(run_fd)
    if ending.error is not None:
        raise ending.error  # profilectl's own failure: the final manifest already says so
    summary = ending.summary
    if shown_dir != run_dir:
        summary = dataclasses.replace(summary, source=dataclasses.replace(summary.source, path=str(shown_dir)))
    return Outcome(ending.exit_code, ending.status, ending.message, shown_dir, manifest, summary)


def _become_owner(plan: Plan, traces_root: Path) -> tuple[bool, str | None]:
    """Root running for another user becomes that user before the run directory exists, keeping only
    the capabilities the plan kept (privilege.py, ownership.become): every file then has the right
    owner from the start. (True, note) when done; (False, None) when profilectl goes on as it is (not
    root, root for root, or --as-root). Where it cannot become the user, it refuses in one line rather
    than run the user's program as root unasked."""
    decided = plan.privilege
    if decided.run_as != privilege.OWNER or decided.owner is None or os.geteuid() != 0:
        return False, None
    owner = decided.owner
    # a SLURM rank's job folder may not exist yet: the user makes it, in the nearest folder that does
    writable = next((folder for folder in (traces_root, *traces_root.parents) if folder.exists()), traces_root)
    try:
        if ownership.can_run_as(owner, (str(writable),), entered=(os.getcwd(),)):
            keep = tuple(ownership.CAP_NUMBERS[name] for name in decided.capabilities)
            return True, ownership.become(owner, keep, ownership.device_groups()).note()
        why = f"uid {owner[0]} cannot enter {os.getcwd()}, write {writable} or run {sys.executable}"
    except OSError as exc:
        if os.geteuid() != 0:  # half done (capabilities refused after the uid changed): say it, go on
            return True, f"profilectl ran as uid {os.geteuid()} without the profiler's capabilities: " \
                         f"{exc.strerror or exc}"
        why = str(exc.strerror or exc)
    raise errors.UsageError(
        f"refusing to run uid {owner[0]}'s run as root: profilectl cannot become that user here ({why}); run "
        f"profilectl as uid {owner[0]} (or where that user can run it), or pass --as-root to run it as root knowingly")


def _own_run_dir(run_dir: Path) -> int | None:
    """A descriptor of the run directory this process just made (never a link, never someone else's)."""
    try:
        fd = ownership.open_dir(run_dir)
    except OSError:
        return None
    if os.fstat(fd).st_uid != os.geteuid():  # swapped for the user's own folder: nothing to hand back
        os.close(fd)
        return None
    return fd


@dataclass
class _Ending:
    """How the run ended, whatever stopped it: what the final manifest says."""
    status: str
    exit_code: int
    message: str
    summary: Summary
    results: list[StepResult]
    notes: tuple[str, ...] = ()
    error: BaseException | None = None  # re-raised after the final manifest is written
    replaced: tuple[str, ...] = ()  # plan notes that `notes` say again with the outcome (said once)


def _start_live(run_dir: Path, stderr: BinaryIO | None) -> "LiveThread":
    """--live: the live view's thread (livewatch.py), its lines on the stderr the workload's output
    is echoed to, through the same never-blocking writer (none when nothing is echoed)."""
    from profilectl.console import stream_fd, writer
    from profilectl.livewatch import LiveThread
    from profilectl.screen import visible
    fd = stream_fd(stderr) if stderr is not None else None
    out = writer(fd) if fd is not None else None
    emit = (lambda text: out.offer(f"profilectl: {visible(text)}\n".encode())) if out is not None else None
    return LiveThread.start(run_dir, emit)


def _run_and_read(plan: Plan, facts: Facts, run_dir: Path, runner: Runner, sampler: Sampler,
                  live: "LiveThread | None" = None) -> _Ending:
    """The phases' steps, then their tables and summary. Every way this can end (a failure, a
    signal, a full disk, a bug in profilectl) becomes an _Ending, so a final manifest is written."""
    phases: list[PhaseOutcome] = []
    results: list[StepResult] = []
    sizing_notes: list[str] = []  # how the repeats were sized, and a `when: cheap` phase left out
    replaced: list[str] = []  # the plan's notes that the sizing notes say again, with the outcome
    empty = Summary(source=SourceInfo(kind="profilectl-run", path=str(run_dir)))
    writing = "the run's files"  # what a full disk interrupted, for the message
    try:
        with runner.interruptible():
            for phase in plan.phases:
                backend = BACKENDS[phase.backend]
                raw = run_dir / phase.raw_dir
                writing = f"{phase.raw_dir}/"
                raw.mkdir(parents=True, exist_ok=True)
                for relative, text in phase.input_files.items():
                    (run_dir / relative).write_text(text)
                worth, why_not = cheap_enough(phase, results)
                if not worth:
                    sizing_notes.append(why_not)
                    continue
                phase_results = _run_steps(runner, phase.steps, phase.environment, results)
                if all(r.returncode == 0 for r in phase_results) and \
                        (sized := sized_steps(plan, phase, facts, phase_results)) is not None:
                    sizing_notes.append(sized.note)
                    replaced.append(sized.replaces)
                    if sized.first_is_run:  # a long job: its one run was the measurement, not a warm-up
                        last = dataclasses.replace(phase_results[-1], timed=True, warmup=False,
                                                   label="run 1/1 (the first run; no warm-up)")
                        phase_results[-1] = results[-1] = last
                    phase_results += _run_steps(runner, sized.steps, phase.environment, results)
                failed = next((r for r in phase_results if r.returncode not in (0, None)), None)
                returncode = failed.returncode if failed else (None if any(r.returncode is None for r in phase_results) else 0)
                writing = f"{phase.backend}'s records in {phase.raw_dir}/"
                backend.record(raw, phase_results)
                try:
                    phases.append(PhaseOutcome(phase.backend, returncode, backend.read(raw)))
                except FormatError as exc:
                    phases.append(PhaseOutcome(phase.backend, returncode, Tables(), read_error=str(exc)))
                if runner.interrupted or runner.timed_out or runner.disk_full or failed:
                    break
            power = sampler.stop()  # the steps are over: reading their files is profilectl's own work
            if live is not None:
                live.stop()  # its last line and poll now, before the report's
            disk_full = _disk_full_message(run_dir, _log_writing(runner), results) if runner.disk_full else None
            status, exit_code, message = _verdict(plan, facts, phases, runner.interrupted, runner.timed_out,
                                                  _tail(run_dir / "stderr.log"), disk_full)
            if runner.supervisor_lost and not (runner.interrupted or runner.timed_out or disk_full):
                status, exit_code, message = "failed", errors.WORKLOAD_FAILED, runner.supervisor_lost
            summary, unwritten = _write_tables_and_summary(run_dir, plan, phases, status, power, tuple(sampler.notes))
            read_only = unwritten is not None and getattr(unwritten, "errno", None) in READ_ONLY_ERRNOS
            if unwritten is not None and read_only:  # the verdict stands; _finish says the folder is read-only
                sampler.notes.append(f"the tables and summary were not written: {run_dir} became read-only")
            elif unwritten is not None:
                if not runs.is_disk_full(unwritten):
                    raise unwritten
                status, exit_code = "disk-full", errors.DISK_FULL
                message = _disk_full_message(run_dir, "the tables and summary (none kept: `profilectl report` "
                                                      "reads raw/ instead)", results)
            notes = tuple(sizing_notes) + tuple(p.read_error for p in phases if p.read_error) + _runner_notes(runner)
            if runner.write_error:
                path, write_error = runner.write_error
                notes += (f"{path.name} is incomplete: {write_error.strerror or write_error}",)
            return _Ending(status, exit_code, message, dataclasses.replace(summary, status=status), results, notes,
                           replaced=tuple(replaced))
    except Interrupted as exc:
        name = signal.Signals(exc.signum).name
        return _Ending("interrupted", errors.INTERRUPTED, f"interrupted by {name} while reading the outputs; "
                       "raw outputs kept", dataclasses.replace(empty, status="interrupted"), results)
    except OSError as exc:
        if exc.errno in READ_ONLY_ERRNOS:  # the folder, not a temporary file's name, is what the user must hear
            return _Ending("failed", errors.USAGE, f"the run folder {run_dir} became read-only ({exc.strerror}) "
                           f"while profilectl wrote {writing}", dataclasses.replace(empty, status="failed"), results)
        if not runs.is_disk_full(exc):
            return _crashed(exc, empty, results)
        message = _disk_full_message(run_dir, _log_writing(runner) if runner.disk_full else writing, results)
        return _Ending("disk-full", errors.DISK_FULL, message, dataclasses.replace(empty, status="disk-full"), results)
    except BaseException as exc:  # noqa: B036 - recorded in the manifest, then re-raised
        return _crashed(exc, empty, results)


def _run_steps(runner: Runner, steps: Iterable[Step], environment: dict[str, str],
               results: list[StepResult]) -> list[StepResult]:
    """The steps in turn, each result also appended to `results`; a failure ends them."""
    done = []
    for step in steps:
        done.append(runner.run(step, environment))
        results.append(done[-1])
        if done[-1].returncode not in (0, None):
            break  # a failing workload fails again: its first failure is the answer
    return done


def _runner_notes(runner: Runner) -> tuple[str, ...]:
    """How the steps were stopped, and what the terminal did not take (the logs have all of it)."""
    dropped = runner.echo_dropped()
    echo = (f"the terminal stopped reading: {runs.human_bytes(dropped)} of the workload's output were not echoed "
            f"(stdout.log and stderr.log have all of it)",) if dropped else ()
    return tuple(runner.notes) + echo


def _crashed(exc: BaseException, empty: Summary, results: list[StepResult]) -> _Ending:
    code = exc.exit_code if isinstance(exc, errors.ProfilectlError) else \
        errors.INTERRUPTED if isinstance(exc, KeyboardInterrupt) else errors.USAGE if isinstance(exc, OSError) else 1
    status = "interrupted" if code == errors.INTERRUPTED else "failed"
    message = f"profilectl stopped: {type(exc).__name__}: {' '.join(str(exc).split())}"
    return _Ending(status, code, message, dataclasses.replace(empty, status=status), results, error=exc)


def _log_writing(runner: Runner) -> str:
    path = runner.disk_full[0] if runner.disk_full else None
    return f"{path.name if path else 'the logs'}, which keeps what fit"


def _disk_full_message(run_dir: Path, what: str, results: list[StepResult]) -> str:
    ran = [r for r in results if r.returncode is not None]
    workload = f"; the last step exited with code {ran[-1].returncode}" if ran else ""
    return f"{runs.no_space(run_dir.parent)} while writing {what}{workload}"


def _finish(run_dir: Path, guard: runs.RunGuard, manifest: Manifest, started: Any, ending: _Ending) -> Manifest:
    finished = runs.now_utc()
    manifest = dataclasses.replace(
        manifest, status=ending.status, exit_code=ending.exit_code, message=ending.message,
        finished_at=runs.iso(finished), wall_seconds=round((finished - started).total_seconds(), 3),
        steps=tuple(StepRecord(label=r.label, exit_code=r.returncode, seconds=round(r.seconds, 6))
                    for r in ending.results),
        perfetto_trace=ending.summary.perfetto_trace,
        notes=tuple(n for n in manifest.notes if n not in ending.replaced) + ending.notes + ending.summary.notes)
    guard.release_reserve()  # the space set aside at the start is for this manifest
    try:
        for _ in range(2):  # twice, so the manifest lists itself with its final size
            manifest = dataclasses.replace(manifest, outputs=runs.output_files(run_dir))
            manifest.write(run_dir)
    except OSError as exc:
        if runs.is_disk_full(exc):
            raise errors.DiskFullError(f"{runs.no_space(run_dir.parent)}: the final manifest of {run_dir} was "
                                       f"not written ({ending.status}: {ending.message})") from None
        if exc.errno in READ_ONLY_ERRNOS:  # said as what happened to the folder, not by a temporary file's name
            said = ending.message if "became read-only" in ending.message else \
                f"the run folder {run_dir} became read-only ({exc.strerror}) (the run ended {ending.status}: {ending.message})"
            raise errors.ProfilectlError(
                f"{said}; its final manifest was not written",
                exit_code=ending.exit_code if ending.exit_code != errors.OK else errors.USAGE) from None
        raise
    return manifest


def _tail(path: Path, limit: int = 200_000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def _verdict(plan: Plan, facts: Facts, phases: list[PhaseOutcome], interrupted: int | None, timed_out: bool,
             stderr_text: str, disk_full: str | None = None) -> tuple[str, int, str]:
    main_backend = phases[0].backend if phases else plan.backend
    if interrupted:
        name = signal.Signals(interrupted).name
        return "interrupted", errors.INTERRUPTED, f"interrupted by {name}; partial outputs kept"
    if timed_out:
        return "timeout", errors.TIMEOUT, \
            f"stopped after the {plan.request.timeout_s:g} s timeout; partial outputs kept"
    if disk_full:  # before `failed`: a workload that could not write its output fails because of it
        return "disk-full", errors.DISK_FULL, disk_full
    failed = next((p for p in phases if p.returncode not in (0, None)), None)
    if failed:
        rc = failed.returncode
        is_profiler = BACKENDS[failed.backend].is_profiler
        found = diagnose(stderr_text, rc) if is_profiler else None
        if found:
            return "failed", errors.PROFILER_FAILED, f"{failed.backend} failed: {found.reason}. Fix: {found.fix}"
        if is_profiler and rc is not None and rc < 0:
            return "failed", errors.PROFILER_FAILED, f"{failed.backend} was killed by signal {-rc}"
        message = _with_collision(_workload_failure(plan, failed, rc or 0, stderr_text), failed.backend, stderr_text)
        return "failed", errors.WORKLOAD_FAILED, _with_missing_module(message, stderr_text, facts)
    main = phases[0] if phases else None
    if main is None or not main.tables.has_data:
        why = main.read_error if main and main.read_error else "no kernels or records were written"
        if plan.request.bounds.any and not (main and main.read_error):
            why += " (the bounds may match nothing: check --kernel against the kernel names of a trace, " \
                   "that --steps falls inside the run, and that the workload enters a --range of that name)"
        return "no-output", errors.PROFILER_FAILED, _with_collision(
            f"{main_backend} ran but produced no readable output: {why}", main_backend, stderr_text)
    # torch that recorded the ranks' CPU operators ran where it should: a workload kept on the CPU (gloo on CPU
    # tensors, data preparation) has no kernels to record; the report says so ("no GPU activity")
    cpu_only = bool(main.tables.operators) and phases[0].backend == "torch"
    if not main.tables.kernels and not main.tables.counters and not cpu_only and _expects_kernels(plan, facts):
        launch = plan.request.launch
        likely = (f"{launch.launcher} started the ranks outside the profiler, or they never used the GPU"
                  if launch.multi_rank else "the workload never used the GPU, or ran it outside the profiler")
        return "no-output", errors.PROFILER_FAILED, (f"{main_backend} ran on a GPU machine but recorded zero GPU "
                                                     f"kernels; likely cause: {likely}")
    return "ok", errors.OK, "ok"


def _expects_kernels(plan: Plan, facts: Facts) -> bool:
    """A GPU tracer or counter tool on a machine with its GPU: a run without one kernel is empty."""
    backend = BACKENDS[plan.phases[0].backend] if plan.phases else None
    if backend is None or plan.request.bounds.any:  # a filter may rightly match nothing: not an empty run
        return False
    return (backend.vendor is not None and facts.first_gpu(backend.vendor) is not None) or \
        (backend.name == "torch" and backend.traces_gpu(facts))


def _with_collision(message: str, backend: str, stderr_text: str) -> str:
    """A workload that runs torch.profiler itself and collided with profilectl's: say so, with the ways out."""
    if backend != "torch" or torch_profiler.COLLISION not in stderr_text:
        return message
    return f"{message}; the workload runs torch.profiler itself and the two profilers collided " \
           f"(\"{torch_profiler.COLLISION}\"): {torch_profiler.WAYS_OUT}"


MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([^'.]+)")


def _with_missing_module(message: str, stderr_text: str, facts: Facts) -> str:
    """A workload that died for want of a Python module: in a container, the image lacks it, and the
    way out is an image that has it (compose builds on $PROFILECTL_BASE_IMAGE); on a host, the
    workload's Python lacks it."""
    found = MISSING_MODULE.findall(stderr_text[-65536:])
    if not found:
        return message
    module = found[-1]
    if not facts.host.in_container:
        return f"{message}; the workload's Python has no module {module!r}: install it for that Python"
    if module == "torch":
        base = ("PROFILECTL_BASE_IMAGE=profilectl-base:bookworm-torch (CPU; docker/offline-base/build.sh --torch "
                "builds it offline) or a ROCm or CUDA PyTorch image (rocm/pytorch:…, nvcr.io/nvidia/pytorch:…)")
    else:
        base = "PROFILECTL_BASE_IMAGE=IMAGE"
    return (f"{message}; the workload needs the Python module {module!r}, which this image lacks: build on a base "
            f"that has it, {base}, then run `tools/profilectl docker` again (it rebuilds on the new base)")


def _workload_failure(plan: Plan, failed: PhaseOutcome, rc: int, stderr_text: str) -> str:
    """The workload's failure, naming the ranks that failed when a launcher says which."""
    launch = plan.request.launch
    ranks = LAUNCHERS[launch.launcher].failed_ranks(stderr_text) if launch.multi_rank else []
    failed_status = [r for r in failed.tables.ranks if r.status and r.status != "ok"]
    in_order = failures.order(failed_status) if launch.multi_rank else None
    if in_order is not None and in_order.first.how == "failed" and in_order.first.at_unix_ns is not None:
        # the ranks' own status files say who failed first and when: better than the launcher's list,
        # except for a rank the launcher saw fail that wrote none (os._exit, a fatal signal, a crash):
        # it died without unwinding, and most likely first (the others then lose their connection)
        with_status = {r.rank for r in failed.tables.ranks if r.status}
        died = [str(r) for r in ranks if str(r.rank) not in with_status]
        before = (f"{', '.join(died)} died without unwinding (no status file: os._exit, a fatal signal or a crash), "
                  "most likely first; then ") if died else ""
        return (f"{before}{failures.sentence(in_order, 'failed' if died else 'failed first')} (under "
                f"{launch.launcher}; the other ranks' files are kept; "
                f"exit {rc})")
    if ranks:
        named = ", ".join(str(r) for r in ranks)
        return f"{named} failed under {launch.launcher}; the other ranks' files are kept (exit {rc})"
    if failed_status and launch.multi_rank:
        named = ", ".join(f"rank {r.rank}" + (f" on {r.host}" if r.host else "") + f" ({r.status})"
                          for r in failed_status)
        return f"{named} failed under {launch.launcher}; the other ranks' files are kept (exit {rc})"
    fatal = LAUNCHERS[launch.launcher].fatal(stderr_text) if launch.multi_rank else None
    if fatal:  # the launcher itself gave up (srun without a reachable controller) before any rank ran
        return f"{launch.launcher} failed: {fatal} (exit {rc})"
    return f"the workload exited with code {rc} (under {failed.backend})"


def _write_csv(path: Path, rows: Iterable[dict[str, Any]]) -> bool:
    rows = list(rows)
    if not rows:
        return False
    columns = list(dict.fromkeys(key for row in rows for key in row))

    def write(fh: Any) -> None:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    write_atomic(path, write)
    return True


def _where(run_dir: Path) -> str:
    """The run directory's path as a user finds it (a /proc/<pid>/fd/<n> path: where it lies now)."""
    if str(run_dir).startswith("/proc/"):
        try:
            return os.readlink(run_dir)
        except OSError:
            pass
    return str(run_dir)


def _relative(run_dir: Path, path: str) -> str:
    try:
        return str(Path(path).relative_to(run_dir))
    except ValueError:
        return path


def _with_step_energy(telemetry: Path, power: PowerSummary, ends_per_run: tuple[tuple[int, ...], ...],
                      warmup_steps: int) -> PowerSummary:
    """The energy of each steady-state step: the step marks (perf_counter_ns) and the samples
    (monotonic_ns) share CLOCK_MONOTONIC, so the power samples are integrated between the marks."""
    from profilectl.telemetry.energy import read_samples, step_energy
    intervals = [(a, b) for ends in ends_per_run for a, b in list(zip(ends, ends[1:]))[warmup_steps:]]
    if not intervals:
        return power
    try:
        return dataclasses.replace(power, steps=step_energy(read_samples(telemetry), intervals))
    except OSError:  # the samples went with the disk: the run's energy is still there
        return power


def _write_tables_and_summary(run_dir: Path, plan: Plan, phases: list[PhaseOutcome], status: str,
                              power: PowerSummary | None = None,
                              notes: tuple[str, ...] = ()) -> tuple[Summary, OSError | None]:
    """The summary, and its tables and summary.json written all or none: when one cannot be
    written (a full disk), those already written are removed too, so no table is left looking
    complete beside a missing one. Returns the write error, if any."""
    tables = merge_all(p.tables for p in phases)
    derived = plan.counter_set.derived if plan.counter_set else {}
    traces = [_relative(run_dir, t) for p in phases for t in p.tables.trace_files]
    summary = summaries.build(tables, SourceInfo(kind="profilectl-run", path=_where(run_dir)), derived,
                              perfetto_trace=traces[0] if traces else None)
    timing = BACKENDS[plan.backend].kernel_timing(plan.request) if tables.kernel_timing else None
    if timing is not None:  # the plan knows more than the files (ncu: the clock control its CSV does not say)
        summary = dataclasses.replace(summary, kernel_timing=timing)
    if len(traces) > 1:  # the first is the run's Perfetto trace (manifest.perfetto_trace), named where the run is
        others = ", ".join(traces[1:4]) + (f" and {len(traces) - 4} more" if len(traces) > 4 else "")
        summary = dataclasses.replace(summary, notes=summary.notes + (
            f"{len(traces) - 1} more Perfetto trace(s), one per process or phase: {others}",))
    if power is not None and summary.step_time is not None:
        power = _with_step_energy(run_dir / power.file, power, tables.step_ends_ns, summary.step_time.warmup_steps)
    summary = dataclasses.replace(summary, status=status, power=power, notes=summary.notes + notes)
    contents: list[tuple[str, Iterable[dict[str, Any]]]] = [
        (f"{name}.csv", (dataclasses.asdict(r) for r in rows))
        for name, rows in (("kernels", summary.kernels), ("api", summary.api),
                           ("memory_copies", summary.memory_copies), ("operators", summary.operators))]
    contents += [("counters.csv", (dataclasses.asdict(c) for c in tables.counters)),
                 ("counters_by_kernel.csv", summary.counters_by_kernel),
                 ("timing.csv", ({"run": i + 1, "seconds": s} for i, s in enumerate(tables.timing_s)))]
    written: list[Path] = []
    try:
        for name, rows in contents:
            if _write_csv(run_dir / name, rows):
                written.append(run_dir / name)
        summary.write(run_dir / "summary.json")
    except OSError as exc:
        for path in written:
            path.unlink(missing_ok=True)
        return summary, exc
    return summary, None
