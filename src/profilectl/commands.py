"""One function per CLI command: wire probe -> plan -> execute -> read -> report, and render (the
measuring commands, profile/counters/trace, are in measuring.py).

Heavier modules (the probe, the backends, rich) are imported inside the commands that use them,
so `report --format json` on a finished run starts fast.
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profilectl import errors, screen, settings

if TYPE_CHECKING:
    from rich.console import Console

    from profilectl.envreport import EnvReport
    from profilectl.facts import Facts

ROOT_ENV = "PROFILECTL_PROBE_ROOT"  # probe a different root file system (tests, chroots)
REQUIRE_CHOICES = {"tracing": "tracing", "counters": "counters", "pc-sampling": "pc_sampling", "timing": "timing",
                   "attach": "attach"}


LOG_WIDTH = 4096  # off a terminal: wide enough that no table cell (a kernel name, a number, a run id) wraps


def _console() -> "Console":
    """The one rich Console every table and line goes through. On a terminal, its width. Off one (a
    CI log, `| tee`, a file) rich would assume 80 columns and wrap cells mid-number and mid-id
    (`295,626` / `,240`): there, lines are as long as their content needs, and nothing is coloured."""
    from profilectl.screen import console
    if sys.stdout.isatty():
        return console(soft_wrap=False)
    return console(soft_wrap=False, width=LOG_WIDTH)


def _runs() -> Any:
    """The run-directory module, imported where a command touches runs (env-check and report do not)."""
    from profilectl import runs
    return runs


def say(message: str) -> None:
    """One line on stderr, never wrapped (rich would wrap at 80 columns off a terminal); a name inside
    it is shown as data (screen.visible: no control character reaches the terminal)."""
    from profilectl.screen import visible
    sys.stderr.write(f"profilectl: {visible(message)}\n")
    sys.stderr.flush()


def _probe(root: str | None = None, path: str | None = None, deep: bool = False, remember: bool = False) -> "Facts":
    from profilectl.probe import probe
    return probe(root or str(settings.get_path(ROOT_ENV) or "/"), path=path, deep=deep, remember=remember)


def _env_report(facts: "Facts") -> "EnvReport":
    from profilectl.envreport import EnvReport
    from profilectl.plan import assess
    return EnvReport(facts, assess(facts))


def _print_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")


def run_path(text: str) -> str:
    """A run as the user gave it: a path, a run id as `ls` prints it, or `latest` (listing.find_run)."""
    from profilectl.read.listing import find_run
    return str(find_run(text, _runs().default_traces_root()))


def shown_path(run_dir: Path) -> str:
    """In a container the run directory is under /workspace/traces; say where it is on the host."""
    on_host = settings.get_path("PROFILECTL_TRACES_ON_HOST")
    try:  # a folder outside the mounted traces folder (--traces-dir /tmp/x) is not on the host
        inside = run_dir.resolve().relative_to(_runs().default_traces_root().resolve())
    except ValueError:
        return str(run_dir)
    return str(on_host / inside) if on_host else str(run_dir)


def _load(path: Path, quiet: bool = False) -> Any:
    """load.load with a spinner on a terminal: a large trace takes a while to read the first time
    (its summary is cached after), and a silent wait looks like a hang."""
    from profilectl.progress import activity
    from profilectl.read import load
    try:
        size = f" ({_runs().human_bytes(path.stat().st_size)})" if path.is_file() else ""
    except OSError:
        size = ""
    how = _JOB_READ.get()
    if how.on_cluster:  # each node reduces its own ranks (a job step), merged here
        from profilectl.read import on_cluster
        with activity(f"reducing {path.name or path} on {', '.join(how.nodes)}", quiet=quiet):
            return on_cluster.merge(path, on_cluster.gather(path, list(how.nodes)))
    with activity(f"reading {path.name or path}{size}", quiet=quiet):
        return load.load(path, raw=how.raw)


@dataclasses.dataclass(frozen=True)
class JobOptions:
    """`report`'s options for a job or a bare folder, as the command line gives them: every raw file
    (--raw), reduced on the nodes (--on-cluster, --nodes, --dry-run), or this node's reduction
    (--reduce-here)."""
    raw: bool = False
    on_cluster: bool = False
    nodes: str | None = None
    dry_run: bool = False
    reduce_here: bool = False


@dataclasses.dataclass(frozen=True)
class JobRead:
    """How `report` reads a SLURM job folder: its ranks' partials (default), every raw file (--raw),
    or reduced on the nodes that hold the files (--on-cluster)."""
    raw: bool = False
    on_cluster: bool = False
    nodes: tuple[str, ...] = ()


_JOB_READ: contextvars.ContextVar[JobRead] = contextvars.ContextVar("job_read", default=JobRead())


def report_job_options(path: str, job: JobOptions, output: str | None = None) -> int | JobRead:
    """report's job options: an exit code when they did the whole work (--reduce-here, --dry-run),
    else how to read the job."""
    if job.reduce_here:
        from profilectl import jobs
        if not jobs.is_job_dir(Path(path)):  # a bare profiler output: one partial per rank, into a folder
            from profilectl.read import bare_partials
            return bare_partials.reduce_command(Path(path), output, sys.stdout)
        from profilectl.read import on_cluster as cluster_read  # subprocess, shutil: only where used
        return cluster_read.reduce_here(Path(path), sys.stdout)
    if job.dry_run and not job.on_cluster:
        raise errors.UsageError("report --dry-run shows the job steps of --on-cluster: add --on-cluster")
    if job.raw and job.on_cluster:
        raise errors.UsageError("--raw and --on-cluster: choose one (--on-cluster reads the raw files on the nodes)")
    if not job.on_cluster:
        return JobRead(raw=job.raw)
    from profilectl.read import on_cluster as cluster_read
    chosen = cluster_read.job_nodes(Path(path), job.nodes)
    if job.dry_run:
        import shlex
        for node in chosen:
            print(shlex.join(cluster_read.step_argv(Path(path), node)))
        return errors.OK
    return JobRead(on_cluster=True, nodes=tuple(chosen))


def env_check(as_json: bool, deep: bool, require: str | None, root: str | None, path: str | None) -> int:
    facts = _probe(root, path, deep, remember=True)  # a run probes afresh; env-check may read kept answers
    if as_json:  # the assessment of facts already assessed is read back, not planned again
        from profilectl.assessment_cache import env_report_dict
        payload = env_report_dict(facts)
        _print_json(payload)
        capability = payload["capabilities"][REQUIRE_CHOICES[require]] if require else None
        available, reason, fix = (capability["available"], capability["reason"], capability["fix"]) \
            if capability else (True, "", None)
    else:
        from profilectl.report import render
        report = _env_report(facts)
        render.env_report(_console(), report)
        verdict = report.assessment.capabilities[REQUIRE_CHOICES[require]] if require else None
        available, reason, fix = (verdict.available, verdict.reason, verdict.fix) if verdict else (True, "", None)
    if not available:
        say(f"{require} unavailable: {reason}.{f' Fix: {fix}' if fix else ''}")
        return errors.UNAVAILABLE
    return errors.OK


def docker(service: str, service_args: list[str], vendor: str, build: bool) -> int:
    from profilectl import compose
    if vendor == "auto":
        vendor = _probe().vendor or "none"
    return compose.run_service(service, service_args, None if vendor == "none" else vendor, build, echo=say)


def cluster(action: str, command: list[str]) -> int:
    from profilectl import cluster as slurm_cluster
    return slurm_cluster.run(action, command)


def ls(traces_dir: str | None, as_json: bool) -> int:
    from profilectl.read.listing import list_runs
    root = Path(traces_dir) if traces_dir else _runs().default_traces_root()
    if root.is_file():
        raise errors.UsageError(f"{root} is a file: ls lists the runs of a traces folder")
    if not root.is_dir():
        raise errors.UsageError(f"traces folder {root} does not exist")
    listed = list_runs(root)
    if as_json:
        _print_json([run.to_dict() for run in listed])
    else:
        from profilectl.report import render
        render.runs_table(_console(), listed, str(root))
    return errors.OK


def report(path: str, fmt: str, output: str | None, top: int, force: bool = False,
           job: JobOptions = JobOptions()) -> int:
    if top < 1:
        raise errors.UsageError("--top must be at least 1")
    # --on-cluster: the job folder is each node's (node-local scratch); it need not exist here
    path = path if job.on_cluster and "/" in path and not Path(path).exists() else run_path(path)
    how = report_job_options(path, job, output=output)
    if isinstance(how, int):
        return how
    if how != JobRead():
        token = _JOB_READ.set(how)
        try:
            return _report_with(path, fmt, output, top, force, cached=False)
        finally:
            _JOB_READ.reset(token)
    return _report_with(path, fmt, output, top, force)


def _report_with(path: str, fmt: str, output: str | None, top: int, force: bool, cached: bool = True) -> int:
    if output and fmt == "csv":
        return report_csv_files(Path(path), output, force)
    if fmt in ("parquet", "sqlite"):
        return report_files(Path(path), fmt, output, force)
    page_to_file = fmt == "html" and sys.stdout.isatty()  # written to a file (_report), nothing printed to keep
    if not output and cached and not page_to_file:  # printed before from the same files, code and settings: again
        from profilectl.report import render_cache
        cache_key = render_cache.key(path, fmt, top)
        if cache_key is not None:
            if render_cache.serve(cache_key):
                return errors.OK
            with render_cache.captured() as printed:
                summary = _report(path, fmt, output, top, force)
            if render_cache.settled(summary) and render_cache.key(path, fmt, top) == cache_key:
                render_cache.keep(cache_key, printed.getvalue())
            return errors.OK
    _report(path, fmt, output, top, force)
    return errors.OK


def report_window(path: str, fmt: str, output: str | None, top: int, force: bool, range_name: str | None,
                  steps: str | None, step_mark: str | None = None) -> int:
    """`report --range NAME` / `--steps A:B`: the report of what was launched inside those windows;
    `--step-mark NAME`: those ranges are the steps (analysis/windows.py). Read from the files each
    time, never from a cache."""
    from profilectl.analysis.windows import WindowRequest, parse_steps
    if top < 1:
        raise errors.UsageError("--top must be at least 1")
    for option, value in (("--range", range_name), ("--step-mark", step_mark)):
        if value is not None and not value.strip():
            raise errors.UsageError(f"{option} needs a range name")
    if fmt in ("parquet", "sqlite") or (output and fmt == "csv"):
        raise errors.UsageError(f"report --range/--steps/--step-mark writes table, json, md, html or csv to stdout; "
                                f"not {fmt} files")
    try:
        request = WindowRequest(range_name=range_name, steps=parse_steps(steps) if steps is not None else None,
                                step_mark=step_mark)
    except errors.FormatError as exc:
        raise errors.UsageError(str(exc)) from None
    _report(run_path(path), fmt, output, top, force, window=request)
    return errors.OK


def _report(path: str, fmt: str, output: str | None, top: int, force: bool, window: Any = None) -> Any:
    """Print (or write to -o) one report of the formats that make one text; the summary it came from."""
    from profilectl.read import load
    from profilectl.report import export, html
    if output:
        check_output(Path(output), force)
    summary = _load(Path(path), quiet=fmt == "json") if window is None else load.load_window(Path(path), window)
    if fmt == "csv":  # to stdout (-o was handled above): one CSV document, the main table; the others need files
        tables = export.csv_tables(summary)
        if len(tables) > 1:
            say(f"csv: the {export.main_csv_table(tables)} table on stdout; -o NAME.csv (or -o FOLDER/) writes all "
                f"{len(tables)} tables, one file each: {', '.join(tables)}")
        screen.write(export.to_csv(tables))
        return summary
    if fmt == "table" and not output:
        from profilectl.report import render
        render.report(_console(), summary, top)
        return summary
    text = {"json": lambda: export.to_json(summary),
            "md": lambda: export.to_markdown(summary, top), "html": lambda: html.to_html(summary, max(top, 15)),
            "table": lambda: export.to_markdown(summary, top)}[fmt]()
    if fmt == "html" and not output and sys.stdout.isatty():  # a page, not text to read: a file, said where
        page = _new_name(Path(f"{Path(path).resolve().name or 'report'}.report.html"))
        write_output(page, text, False, inputs=[Path(path), *map(Path, summary.source.files)])
        say(f"wrote {page}: a self-contained page, open it in a browser (-o FILE names it; piped, the HTML is printed)")
        return summary
    if output:
        write_output(Path(output), text, force, inputs=[Path(path), *map(Path, summary.source.files)])
        say(f"wrote {output}")
    else:
        screen.write(text)  # on a terminal, the trace's names cannot drive it
    return summary


def _new_name(wanted: Path) -> Path:
    """`wanted`, or NAME-2.html, NAME-3.html ... where it exists: a file never written over unasked."""
    candidate, number = wanted, 1
    while candidate.exists() or candidate.is_symlink():
        number += 1
        candidate = wanted.with_name(f"{wanted.name.removesuffix('.html')}-{number}.html")
    return candidate


def csv_targets(output: str, names: list[str]) -> dict[str, Path]:
    """`-o FOLDER/` (or an existing folder): FOLDER/<table>.csv; `-o NAME.csv`: NAME.<table>.csv."""
    target = Path(output)
    if output.endswith(("/", os.sep)) or target.is_dir():
        return {name: target / f"{name}.csv" for name in names}
    stem = target.name[:-len(".csv")] if target.name.endswith(".csv") else target.name
    return {name: target.with_name(f"{stem}.{name}.csv") for name in names}


def report_csv_files(path: Path, output: str, force: bool) -> int:
    """Every table of the report as a CSV file of its own, all written or none."""
    from profilectl.read import load
    from profilectl.report import export
    folder = Path(output) if output.endswith(("/", os.sep)) else Path(output).parent
    if folder.exists() and not folder.is_dir():
        raise errors.UsageError(f"{folder} is not a folder: -o FOLDER/ writes one CSV file per table there")
    summary = _load(path)
    tables = export.csv_tables(summary)
    targets = csv_targets(output, list(tables))
    for target in targets.values():  # every name judged before the first is written
        check_output(target, force)
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    try:
        for name, target in targets.items():
            write_output(target, export.csv_text(tables[name]), force, inputs=[path, *map(Path, summary.source.files)])
            written.append(target)
    except BaseException:
        for done in written:  # all or none: a half set of tables would pass for the whole report
            done.unlink(missing_ok=True)
        raise
    say(f"wrote {len(written)} CSV tables: {', '.join(str(t) for t in written)}")
    return errors.OK


def report_files(path: Path, fmt: str, output: str | None, force: bool) -> int:
    """Parquet: one file per table into -o FOLDER (all written or none); SQLite: one database -o FILE."""
    from profilectl.read import load
    from profilectl.report.renderers import machine
    from profilectl.report.sections import build_document
    if not output:
        where = "-o FOLDER (one .parquet file per table)" if fmt == "parquet" else "-o FILE.sqlite"
        raise errors.UsageError(f"--format {fmt} writes files, not stdout: pass {where}")
    if fmt == "sqlite":
        check_output(Path(output), force)
    elif Path(output).exists() and not Path(output).is_dir():
        raise errors.UsageError(f"{output} is not a folder: --format parquet -o FOLDER writes one file per table there")
    if fmt == "parquet":
        try:
            import polars  # noqa: F401
        except ImportError:
            raise errors.UsageError("--format parquet needs polars: pip install 'profilectl[fast]'") from None
    summary = _load(path, quiet=True)
    document = build_document(summary)
    inputs = [path, *map(Path, summary.source.files)]
    if fmt == "sqlite":
        data = machine.sqlite_bytes(document)
        return _write_new(Path(output), force, inputs, lambda fh: fh.write(data))
    folder = Path(output)
    names = list(machine.csv_tables(document))
    targets = [folder / f"{name}.parquet" for name in names]
    for target in targets:
        check_output(target, force)
    folder.mkdir(parents=True, exist_ok=True)
    frames = machine.frames(document)
    written: list[Path] = []
    try:
        for name, target in zip(names, targets):
            data = machine.parquet_bytes(frames[name])
            _write_new(target, force, inputs, lambda fh: fh.write(data), quiet=True)
            written.append(target)
    except BaseException:
        for done in written:  # all or none, as CSV
            done.unlink(missing_ok=True)
        raise
    say(f"wrote {len(written)} Parquet tables in {folder}: {', '.join(names)}")
    return errors.OK


def _write_new(target: Path, force: bool, inputs: list[Path], write: Any, quiet: bool = False) -> int:
    """A binary file written through `write(fh)` to a temporary beside its final name, then moved
    there (files.write_into: never half a file under it, never through a planted link, nothing left
    behind on a failure)."""
    from profilectl.files import NotARegularFile, write_into
    if os.path.lexists(target) and any(_same_file(target, source) for source in inputs):
        raise errors.UsageError(f"refusing to write {target}: it is a file the report reads")
    try:
        write_into(target, write, replace=force)
    except NotARegularFile as exc:
        raise errors.UsageError(f"refusing to write {target}: {exc}, not a regular file (-o only ever "
                                f"replaces regular files, also with --force)") from None
    except FileExistsError:
        raise errors.UsageError(f"refusing to overwrite {target}: it appeared while the report was made; "
                                f"pass --force to replace it") from None
    except OSError as exc:
        if _runs().is_disk_full(exc):
            raise errors.DiskFullError(f"cannot write {target}: {_runs().no_space(target.parent)}") from None
        raise errors.UsageError(f"cannot write {target}: {exc.strerror or exc}") from None
    if not quiet:
        say(f"wrote {target}")
    return errors.OK


QUERY_TABLE_ROWS = 10_000  # a terminal table holds its rows to size its columns: csv and json stream every row


def query(path: str, sql: str, fmt: str, timeout_s: float | None = None, memory_mb: float | None = None) -> int:
    """SQL (SQLite) over the report's tables of a run, a job or a folder of profiler outputs: read-only,
    within a time and a memory budget, Ctrl-C honoured, rows streamed to stdout (report/query.py)."""
    from profilectl.read import load
    from profilectl.report.query import Budget, opened
    from profilectl.report.sections import build_document
    budget = Budget.of(timeout_s, memory_mb)  # a bad value is one line before anything is read
    with opened(build_document(load.load(Path(run_path(path)))), sql, budget) as result:
        {"json": _query_json, "csv": _query_csv}.get(fmt, _query_table)(result)
    return errors.OK


def _query_json(result: Any) -> None:
    """A JSON array, one object per row, written as each row comes (the layout json.dumps(indent=2)
    gives the whole list; ensure_ascii: no control character reaches a terminal)."""
    first = True
    for row in result.rows:
        item = json.dumps(dict(zip(result.columns, row)), indent=2, default=str)
        sys.stdout.write(("[\n" if first else ",\n") + "\n".join("  " + line for line in item.splitlines()))
        first = False
    sys.stdout.write("[]\n" if first else "\n]\n")


def _query_csv(result: Any) -> None:
    import csv
    import io
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(result.columns)
    for count, row in enumerate(result.rows, 1):
        writer.writerow(row)
        if count % 1024 == 0:
            screen.write(buffer.getvalue())
            buffer.seek(0)
            buffer.truncate()
    screen.write(buffer.getvalue())


def _query_table(result: Any) -> None:
    from rich.table import Table

    from profilectl.model import units
    shown: list[tuple[Any, ...]] = []
    count = 0
    for row in result.rows:  # past the first QUERY_TABLE_ROWS, only counted
        count += 1
        if count <= QUERY_TABLE_ROWS:
            shown.append(row)
    title = f"{count} row(s)" if count <= QUERY_TABLE_ROWS else \
        f"the first {QUERY_TABLE_ROWS} of {count} rows (--format csv or json prints every row)"
    table = Table(title=title, title_justify="left")
    for index, column in enumerate(result.columns):
        numbers = any(isinstance(r[index], (int, float)) for r in shown)
        table.add_column(screen.text(column), justify="right" if numbers else "left", overflow="fold")
    for row in shown:  # every cell is data: never markup, no control character
        table.add_row(*[units.number(v) if isinstance(v, (int, float)) else screen.text("" if v is None else v)
                        for v in row])
    _console().print(table)


def check_output(output: Path, force: bool) -> None:
    """`report -o` never writes over a run's own files (not even with --force), never over an
    existing file without --force, and never through a symbolic link it did not expect."""
    from profilectl.files import not_a_regular_file
    standing = not_a_regular_file(output)
    if standing == "a folder" or (standing is None and output.is_dir()):
        raise errors.UsageError(f"{output} is a folder: -o takes a file name")
    if standing:  # /dev/null, a fifo, a socket: never replaced, not even with --force
        raise errors.UsageError(f"refusing to write {output}: it is {standing}, not a regular file "
                                f"(-o only ever replaces regular files, also with --force)")
    run_dir = _runs().enclosing_run(output)
    if run_dir is not None:
        inside = output.parent.resolve().relative_to(run_dir) / output.name
        if os.path.lexists(output) or inside.parts[0] in _runs().RUN_FILES:
            raise errors.UsageError(f"refusing to write {output}: it is the run's own file {inside} in {run_dir}; "
                                    f"write the report outside the run directory")
    if os.path.islink(output) and not force:
        raise errors.UsageError(f"refusing to write {output}: it is a symbolic link (to {os.readlink(output)}); "
                                f"pass --force to replace the link itself (its target is left alone)")
    if os.path.lexists(output) and not force:
        raise errors.UsageError(f"refusing to overwrite {output}: it exists; pass --force to replace it")


def write_output(output: Path, text: str, force: bool, inputs: list[Path]) -> None:
    from profilectl.files import NotARegularFile, write_text_new
    if os.path.lexists(output) and any(_same_file(output, source) for source in inputs):
        raise errors.UsageError(f"refusing to write {output}: it is a file the report reads")
    try:
        write_text_new(output, text, replace=force)
    except NotARegularFile as exc:
        raise errors.UsageError(f"refusing to write {output}: {exc}, not a regular file (-o only ever "
                                f"replaces regular files, also with --force)") from None
    except FileExistsError:
        raise errors.UsageError(f"refusing to overwrite {output}: it appeared while the report was made; "
                                f"pass --force to replace it") from None
    except OSError as exc:
        if _runs().is_disk_full(exc):
            raise errors.DiskFullError(f"cannot write {output}: {_runs().no_space(output.parent)}") from None
        raise errors.UsageError(f"cannot write {output}: {exc.strerror or exc}") from None


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def compare(path_a: str, path_b: str, fmt: str, top: int, match: str = "exact", *,
            fail_if_slower: str | None = None, metric: str | None = None) -> int:
    """Two runs side by side; with --fail-if-slower (or --metric), the CI gate: exit SLOWER when NEW
    (path_b) is slower than BASE (path_a) by more than the threshold, after printing the result."""
    import dataclasses
    from profilectl.read import load
    from profilectl.report import export
    from profilectl.report.compare import compare as compare_summaries
    from profilectl.report.compare import gate, parse_metric, parse_threshold
    threshold = parse_threshold(fail_if_slower) if fail_if_slower is not None else None  # before any reading
    if metric is not None:
        parse_metric(metric)
    path_a, path_b = run_path(path_a), run_path(path_b)
    base, new = _load(Path(path_a), quiet=fmt == "json"), _load(Path(path_b), quiet=fmt == "json")
    result = compare_summaries(base, new, match)
    if threshold is not None or metric is not None:
        result = dataclasses.replace(result, gate=gate(base, new, metric, threshold))
    from profilectl.model.document import Document
    from profilectl.report.sections.roofline import compare_section
    moved = compare_section(base, new)  # each kernel's movement under the roofline, where both runs have one
    extra = Document(title="", metadata=(), sections=(moved,)) if moved else None
    if fmt == "json":
        payload = result.to_dict()
        if extra:
            from profilectl.report.renderers.machine import to_dict
            payload["roofline"] = to_dict(extra)["sections"][0]
        _print_json(payload)
    elif fmt == "md":
        screen.write(export.comparison_markdown(result, top))
        if extra:
            from profilectl.report.renderers import markdown
            screen.write("\n" + markdown.render(extra, top, header=False))
    else:
        from profilectl.report import render
        render.comparison(_console(), result, top)
        if extra:
            from profilectl.report.renderers import terminal
            terminal.render(_console(), extra, top, header=False)
    if result.gate and result.gate.verdict == "fail":
        say(export.gate_line(result.gate))
        return errors.SLOWER
    return errors.OK


def merge_trace(path: str, output: str | None, steps: str | None, max_mb: float, force: bool, as_json: bool) -> int:
    """One Chrome/Perfetto trace of a multi-rank job: a process track per rank, clocks aligned."""
    from profilectl.report import merged_trace
    from profilectl.request import parse_bounds
    merged_trace.check_max_mb(max_mb)  # before anything is read
    window = parse_bounds(steps=steps).steps if steps is not None else None
    source = Path(run_path(path))
    target = Path(output) if output else Path(f"{source.resolve().name}.merged.trace.json.gz")
    check_output(target, force)
    from profilectl.files import NotARegularFile
    try:
        result = merged_trace.merge(source, target, steps=window, max_mb=max_mb, progress=say)
    except merged_trace.OutputError as failed:  # nothing is left behind (files.write_into)
        exc = failed.cause
        if isinstance(exc, NotARegularFile):
            raise errors.UsageError(f"refusing to write {target}: {exc}, not a regular file") from None
        if _runs().is_disk_full(exc):
            raise errors.DiskFullError(f"cannot write {target}: {_runs().no_space(target.parent)}; "
                                       "nothing was left behind") from None
        raise errors.UsageError(f"cannot write {target}: {exc.strerror or exc}") from None
    if as_json:
        _print_json(result.to_dict())
    else:
        for line in merged_trace.lines(result):
            screen.write(line + "\n")
    return errors.OK


def watch(path: str, interval_s: float = 1.0) -> int:
    """`profilectl watch RUN`: follow a run being written until it ends (livewatch.watch)."""
    from profilectl.livewatch import watch as follow
    ended = follow(Path(path), sys.stdout, sys.stdout.isatty(), interval_s)
    say(ended)
    return errors.OK
