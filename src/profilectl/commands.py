"""One function per CLI command: wire probe -> plan -> run -> read -> report, and render."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from typing import TYPE_CHECKING

from profilectl import errors, runs

if TYPE_CHECKING:
    from rich.console import Console

# Heavier modules (the probe, backends, rich) are imported inside the commands that use them, so
# `report --format json` on a finished run starts fast.

ROOT_ENV = "PROFILECTL_PROBE_ROOT"  # probe a different root file system (tests, chroots)
REQUIRE_CHOICES = {"tracing": "tracing", "counters": "counters", "pc-sampling": "pc_sampling", "timing": "timing"}


def _console(stderr: bool = False) -> "Console":
    from rich.console import Console
    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def _probe(root: str | None = None, path: str | None = None, deep: bool = False):
    from profilectl.probe import probe
    return probe(root or os.environ.get(ROOT_ENV) or "/", path=path, deep=deep)


def _print_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")


def shown_path(run_dir: Path) -> str:
    """In a container the run directory is under /workspace/traces; say where it is on the host."""
    on_host = os.environ.get("PROFILECTL_TRACES_ON_HOST")
    return str(Path(on_host) / run_dir.name) if on_host else str(run_dir)


def env_check(as_json: bool, deep: bool, require: str | None, root: str | None, path: str | None) -> int:
    from profilectl.report import render
    env = _probe(root, path, deep)
    if as_json:
        _print_json(env.to_dict())
    else:
        render.env_report(_console(), env)
    if require:
        verdict = env.capabilities[REQUIRE_CHOICES[require]]
        if not verdict.available:
            fix = f" Fix: {verdict.fix}" if verdict.fix else ""
            _console(stderr=True).print(f"profilectl: {require} unavailable: {verdict.reason}.{fix}",
                                        markup=False, highlight=False)
            return errors.UNAVAILABLE
    return errors.OK


def measure(service: str, workload: list[str], *, backend: str | None, dry_run: bool, timeout: float | None,
            as_json: bool, traces_dir: str | None, env_items: list[str], serialize: bool,
            repeat: int = 5, warmup: int = 1, counter_set: str = "basic", fallback: bool = False,
            preset: str = "lightweight") -> int:
    from profilectl import execute
    from profilectl.report import render
    from profilectl.request import Request, parse_env_assignments, resolve_workload
    from profilectl.runner import terminal_streams
    env = _probe()
    prefer_hip = env.first_gpu("amd") is not None and env.torch.backend != "rocm"
    argv, source = resolve_workload(workload, prefer_hip)
    request = Request(service=service, workload=argv, workload_source=source, backend=backend,
                      counter_set=counter_set, preset=preset, fallback=fallback, timeout_s=timeout,
                      serialize=serialize, repeat=repeat, warmup=warmup,
                      env_overrides=parse_env_assignments(env_items))
    traces_root = Path(traces_dir) if traces_dir else runs.default_traces_root()
    if dry_run:
        plan = execute.dry_run(request, env, traces_root).to_dict()
        if as_json:
            _print_json(plan)
        else:
            render.plan(_console(), plan)
        return errors.OK
    echo = terminal_streams(quiet_stdout=as_json)
    outcome = execute.run(request, env, traces_root, echo)
    if as_json:
        _print_json({"exit_code": outcome.exit_code, "status": outcome.status, "message": outcome.message,
                     "run_dir": str(outcome.run_dir), "manifest": outcome.manifest, "summary": outcome.summary})
    else:
        render.outcome(_console(), outcome.manifest, outcome.summary, shown_path(outcome.run_dir))
    if outcome.exit_code != errors.OK:
        _console(stderr=True).print(f"profilectl: {outcome.status}: {outcome.message}", markup=False, highlight=False)
    return outcome.exit_code


def docker(service: str, workload: list[str], vendor: str, build: bool) -> int:
    from profilectl import compose
    if vendor == "auto":
        vendor = _probe().vendor
    return compose.run_service(service, workload, None if vendor == "none" else vendor, build,
                               echo=lambda line: _console(stderr=True).print(line, markup=False, highlight=False))


def ls(traces_dir: str | None, as_json: bool) -> int:
    from profilectl.report import render
    from profilectl.report.listing import list_runs
    root = Path(traces_dir) if traces_dir else runs.default_traces_root()
    if not root.is_dir():
        raise errors.UsageError(f"traces folder {root} does not exist")
    listed = list_runs(root)
    if as_json:
        _print_json(listed)
    else:
        render.runs_table(_console(), listed, str(root))
    return errors.OK


def report(path: str, fmt: str, output: str | None, top: int) -> int:
    from profilectl.report import export, html, load
    if top < 1:
        raise errors.UsageError("--top must be at least 1")
    summary = load.load(Path(path))
    if fmt == "table" and not output:
        from profilectl.report import render
        render.report(_console(), summary, top)
        return errors.OK
    text = {"json": lambda: export.to_json(summary), "csv": lambda: export.to_csv(summary),
            "md": lambda: export.to_markdown(summary, top), "html": lambda: html.to_html(summary, max(top, 15)),
            "table": lambda: export.to_markdown(summary, top)}[fmt]()
    if output:
        try:
            Path(output).write_text(text)
        except OSError as exc:
            raise errors.UsageError(f"cannot write {output}: {exc.strerror}") from None
        _console(stderr=True).print(f"profilectl: wrote {output}", markup=False, highlight=False)
    else:
        sys.stdout.write(text)
    return errors.OK


def compare(path_a: str, path_b: str, fmt: str, top: int, match: str = "exact") -> int:
    from profilectl.report import load, render
    from profilectl.report.compare import compare as compare_summaries
    result = compare_summaries(load.load(Path(path_a)), load.load(Path(path_b)), match)
    if fmt == "json":
        _print_json(result)
    elif fmt == "md":
        sys.stdout.write(render.comparison_markdown(result, top))
    else:
        render.comparison(_console(), result, top)
    return errors.OK
