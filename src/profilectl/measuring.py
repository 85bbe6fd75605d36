"""The measuring commands (profile, counters, trace): their options as one value, probe -> request
-> plan (`prepare`), then the run and its result (`measure`, `execute_prepared`), and what a SLURM
rank writes for its job as it ends (its partial, job.json).

The CLI (cli.run_options) and the Python API (profilectl.run) build one `RunOptions` from the same
words, so both make the same request and plan.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from profilectl import errors, settings
from profilectl.commands import (ROOT_ENV, _console, _env_report, _print_json, _probe, _runs, say,
                                 shown_path)

if TYPE_CHECKING:
    from rich.console import Console

    from profilectl.execute import Outcome
    from profilectl.facts import Facts
    from profilectl.plan import Plan


@dataclass(frozen=True)
class RunOptions:
    """A measuring command's options as the user gave them (before the machine is probed): what
    `profilectl profile|counters|trace ...` and `profilectl.run(...)` both parse their words into."""
    service: str  # profile | counters | trace
    workload: tuple[str, ...] = ()  # after `--` (empty: $PROFILECTL_WORKLOAD or the built-in one)
    dry_run: bool = False
    as_json: bool = False
    quiet: bool = False  # the workload's output to its logs only
    backend: str | None = None
    timeout: float | None = None
    traces_dir: str | None = None
    env_items: tuple[str, ...] = ()  # --env KEY=VALUE, as written
    serialize: bool = False
    sample: bool = True
    redact: bool = True
    as_root: bool = False
    # profile
    repeat: int | None = None
    warmup: int | None = None
    torch_pass: str = "auto"
    live: bool = False
    # counters
    counter_set: str = "basic"
    fallback: bool = False
    clock_control: str = "base"
    include_collectives: bool = False
    # trace
    preset: str = "lightweight"
    shapes: bool = False
    memory: bool = False
    # counters and trace: the bounds (request.parse_bounds's keywords, as (name, value) pairs) and --attach
    bounds: tuple[tuple[str, Any], ...] = ()
    attach: int | None = None
    duration: float | None = None
    ranks: str | None = None


def measure(options: RunOptions) -> int:
    """profile, counters, trace: prepare, then print the plan (--dry-run) or run it and print the outcome."""
    prepared = prepare(options)
    dry_run, as_json, quiet = options.dry_run, options.as_json, options.quiet
    plan, task = prepared.plan, prepared.task
    if dry_run:
        if as_json:
            _print_json(plan.redacted().to_dict())
        else:
            from profilectl.report import render
            render.plan(_console(), plan.redacted())
        return errors.OK
    from profilectl.console import deliver, held_signals, writer
    from profilectl.runner import terminal_streams
    job_dir = prepared.job_dir
    # From here a signal stops the run (the runner's handlers) or cuts the printing of its result
    # short, never profilectl itself: the exit code is always the one the final manifest holds.
    with held_signals() as held:
        outcome = execute_prepared(prepared, terminal_streams(quiet_stdout=as_json), quiet=quiet)
        if as_json:
            text = json.dumps({"exit_code": outcome.exit_code, "status": outcome.status, "message": outcome.message,
                               "run_dir": str(outcome.run_dir), "manifest": outcome.manifest.to_dict(),
                               "summary": outcome.summary.to_dict()}, indent=2, default=str) + "\n"
        else:
            from profilectl.report import render
            brief = f"rank {task.rank} on {task.node}: " if task and task.rank != 0 else ""
            console, captured = _captured_console()
            render.outcome(console, outcome.manifest, outcome.summary, shown_path(outcome.run_dir), brief)
            text = captured.getvalue()
        # Bounded: a reader that stopped reading gets the result for a while, then profilectl ends anyway.
        printed = deliver(1, text, held)
        if outcome.exit_code != errors.OK:
            if quiet:  # the workload's last words, which --quiet kept off the terminal
                deliver(2, _log_tail(outcome.run_dir / "stderr.log"), held)
            deliver(2, f"profilectl: {outcome.status}: {outcome.message}\n", held)
        if not printed and not writer(1).broken:  # a reader that left (`| head`) chose to; one that stalled is told
            deliver(2, f"profilectl: stdout did not take the result (the run is complete: {outcome.run_dir})\n",
                    held, wait_s=1.0)
    return outcome.exit_code


class Prepared(NamedTuple):
    """A measuring command decided, not yet run: the plan, the machine's facts, the SLURM task."""
    plan: "Plan"
    facts: "Facts"
    task: Any
    job_dir: Path | None


def prepare(options: RunOptions) -> Prepared:
    """probe -> request -> plan, for the CLI and the Python API alike (profilectl.run)."""
    from profilectl import execute
    from profilectl.plan import make_plan
    from profilectl.request import Request, parse_bounds, parse_env_assignments, parse_ranks, resolve_workload
    o = options
    service, workload, attach, duration, traces_dir = o.service, o.workload, o.attach, o.duration, o.traces_dir
    env_overrides = parse_env_assignments(list(o.env_items))
    if duration is not None and attach is None:
        raise errors.UsageError("--duration goes with --attach PID (a started workload runs to its end; see --timeout)")
    if attach is not None and workload:
        raise errors.UsageError("--attach PID profiles a running process: give no workload after --")
    facts = _probe()
    target = None
    if attach is not None:  # the running process is the workload: its command line goes in the manifest
        from profilectl.probe.attach import snapshot
        from profilectl.probe.machine import Machine
        target = snapshot(Machine(root=settings.get_path(ROOT_ENV) or Path("/")), attach, duration)
        if not target.exists:
            raise errors.UsageError(f"--attach {attach}: no such process (give the PID of a running process)")
        argv, source = target.cmdline or (f"pid {attach}",), "attach"
    else:
        prefer_hip = facts.first_gpu("amd") is not None and facts.torch.backend != "rocm"
        argv, source = resolve_workload(workload, prefer_hip)
    request = Request(service=service, workload=tuple(argv), workload_source=source, backend=o.backend,
                      counter_set=o.counter_set, preset=o.preset, fallback=o.fallback, timeout_s=o.timeout,
                      serialize=o.serialize, repeat=o.repeat, warmup=o.warmup, torch_pass=o.torch_pass,
                      env_overrides=env_overrides,
                      clock_control=o.clock_control, bounds=parse_bounds(**dict(o.bounds)),
                      include_collectives=o.include_collectives, sample=o.sample, attach=target,
                      ranks=parse_ranks(o.ranks), redact=o.redact, as_root=o.as_root, live=o.live,
                      record_shapes=o.shapes, memory_history=o.memory)
    traces_root = Path(traces_dir) if traces_dir else _runs().default_traces_root()
    if o.as_root and facts.host.uid != 0:
        raise errors.UsageError(f"--as-root: profilectl runs as uid {facts.host.uid}, not root; leave --as-root out")
    # who the run is for: root writing into another user's traces folder runs as that user (privilege.py)
    request = dataclasses.replace(request, run_for=_runs().host_owner(traces_root))
    from profilectl.jobs import SlurmTask
    task = None if settings.get_bool("PROFILECTL_NO_JOB") else SlurmTask.from_env()
    job_dir = task.job_dir(traces_root, service) if task else None
    # A task of a SLURM job step: its run is <job dir>/<host>-rank<R>/ (jobs.py)
    proposed = task.rank_dir(job_dir) if task and job_dir else _runs().proposed_run_dir(traces_root, service)
    if task and proposed.exists():  # never a second folder name: ranks find each other by these names
        raise errors.UsageError(f"{shown_path(proposed)} already holds rank {task.rank} of an earlier job "
                                f"{task.job_id}.{task.step_id} (job ids start again on a new cluster): move it "
                                "away or use another --traces-dir")
    from profilectl.probe.listing_cache import cached_lister
    # Counter names are checked against the GPU's listing, kept per machine and release: a dry run
    # reads a kept listing (or runs the listing command, never the profiler) and says when it has none.
    plan = make_plan(request, facts, proposed, list_counters=cached_lister(facts, execute.list_counters))
    return Prepared(plan, facts, task, job_dir)


def _log_tail(path: Path, lines: int = 10) -> str:
    """The last lines of a run's log, for a failed --quiet run (empty when there are none)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - 64 * 1024))
            tail = fh.read().decode(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return "".join(f"  {line}\n" for line in tail) if tail else ""


def execute_prepared(prepared: Prepared, streams: Any, update_job: bool = True, quiet: bool = False) -> "Outcome":
    """Run a prepared plan (the run directory, the processes, the summary); a SLURM task's job
    manifest is updated after it unless the caller does that itself. `quiet`: the workload's output
    to its logs only."""
    from profilectl import execute
    outcome = execute.run(prepared.plan, _env_report(prepared.facts), streams, quiet=quiet)
    if prepared.task and prepared.job_dir:
        _write_partial(outcome, prepared.task)
    if update_job and prepared.task and prepared.job_dir:
        _update_job(prepared.job_dir, prepared.task)
    return outcome


def _write_partial(outcome: "Outcome", task: Any) -> None:
    """The rank's partial, made where it ran as it ends (read/partials.py): the job's report
    merges these instead of re-reading every rank's raw files. It only saves time: a failure to
    make it is one line, and the report rebuilds it."""
    from profilectl.jobs import JobRank
    from profilectl.read import partials
    rank = JobRank(rank=task.rank, host=task.node, status=outcome.status, run=outcome.run_dir.name,
                   exit_code=outcome.manifest.exit_code, message=outcome.manifest.message)
    try:
        written = partials.write(outcome.run_dir, partials.make(outcome.run_dir / "raw", rank))
        if written is not None:
            _runs().hand_over(written, _runs().host_owner(outcome.run_dir.parent.parent), recursive=False)
    except (OSError, errors.ProfilectlError) as exc:
        say(f"rank {task.rank}: partial not written ({exc}); the report will read its raw files")


def _captured_console() -> tuple["Console", Any]:
    """A console like the terminal's (width, colours) that renders into a string."""
    import io

    from profilectl.screen import console
    real = _console()
    captured = io.StringIO()
    return console(file=captured, soft_wrap=False, width=real.width, force_terminal=real.is_terminal,
                   color_system=real.color_system or None), captured


def _update_job(job_dir: Path, task: Any) -> None:
    """This rank's view of the whole job, written as it ends (a full disk or a read-only share
    costs the job.json convenience file only: the rank's own run is complete)."""
    from profilectl import jobs
    # PROFILECTL_JOB_SCRATCH=1: ranks write to node-local folders on purpose, copied back later
    # (examples/slurm/profile.sbatch): a folder with one node's ranks is expected, not a mistake.
    scratch = False
    try:  # a variable that does not fit costs job.json only, said in one line
        scratch = settings.get_bool("PROFILECTL_JOB_SCRATCH")
        wait = 0.0 if scratch else settings.get_float("PROFILECTL_JOB_WAIT_S") or 0.0
        job = jobs.write(job_dir, task, wait_for_ranks_s=wait)
        _runs().hand_over(job_dir / jobs.JOB_MANIFEST, _runs().host_owner(job_dir.parent))
        _runs().hand_over(job_dir, _runs().host_owner(job_dir.parent), recursive=False)
    except (OSError, errors.ProfilectlError) as exc:
        say(f"job manifest not updated: {exc}")
        return
    if scratch:
        return
    first_here = task.rank == min((r.rank for r in job.ranks), default=task.rank)
    # One voice for the job (rank 0), unless rank 0 cannot speak or sees another folder than this node
    if task.rank == 0 or job.status == "failed" or (job.status == "incomplete" and first_here):
        say(f"job {job.job_id}.{job.step_id}: {job.status}: {job.message} → {shown_path(job_dir)} "
            "(profilectl report on it reads every rank)")
