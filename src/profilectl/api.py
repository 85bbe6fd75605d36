"""The Python API: profilectl's results as polars DataFrames, in a notebook or a script.

    import profilectl
    run = profilectl.open("traces/20261121T101500Z-trace-1a2b3c")   # a run, a SLURM job, or any
    run.kernels                                                     # folder/file a profiler wrote
    run.kernels_by_rank.filter(pl.col("rank") == "1")
    profilectl.compare(base, new).kernels
    run.sql("SELECT name, SUM(total_ns) FROM kernels GROUP BY name")
    profilectl.run("trace", ["--", "python3", "train.py"])          # the CLI's options, the same run

Stable by API_VERSION (as summary.json by its schema_version): a table or a column is never renamed
or removed without a new version; new tables and columns may be added. Tables are the report's
tables, every row, raw numbers in columns named by their unit (total_ns, time_s, power_w,
busy_percent); a table the data does not have is an empty DataFrame. polars is needed (the `fast`
extra); `import profilectl` stays cheap: this module loads on first use.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    import polars as pl

    from profilectl.plan import Plan
    from profilectl.report.compare import Comparison, Gate
    from profilectl.model.document import Document
    from profilectl.read.summary import Summary

API_VERSION = 1


def _polars() -> Any:
    try:
        import polars
    except ImportError:
        from profilectl.errors import UsageError
        raise UsageError("the Python API needs polars: pip install 'profilectl[fast]' (or polars)") from None
    return polars


class Run:
    """One run, SLURM job or folder of profiler outputs, read once (its Summary), its tables as
    DataFrames on first use."""

    def __init__(self, path: Path, summary: "Summary") -> None:
        self.path = path
        self.summary = summary

    def __repr__(self) -> str:
        return f"profilectl.Run({str(self.path)!r}: {self.document.title})"

    @functools.cached_property
    def document(self) -> "Document":
        from profilectl.report.sections import build_document
        return build_document(self.summary)

    @functools.cached_property
    def tables(self) -> dict[str, "pl.DataFrame"]:
        """Every table of the report by its key (kernels, api, memory_copies, ...), every row."""
        _polars()
        from profilectl.report.renderers.machine import frames
        return frames(self.document)

    def table(self, key: str) -> "pl.DataFrame":
        return self.tables.get(key, _polars().DataFrame())

    def _annotations(self) -> "pl.DataFrame":
        """User ranges and profiler steps together, as API version 1 has them (the report shows them apart)."""
        parts = [frame for frame in (self.table("annotations"), self.table("profiler_steps")) if frame.height]
        return _polars().concat(parts, how="diagonal_relaxed") if len(parts) > 1 else parts[0] if parts else \
            _polars().DataFrame()

    kernels = property(lambda self: self.table("kernels"), doc="name, calls, total_ns, mean_ns, min_ns, max_ns, "
                       "std_ns, percent: one row per kernel, heaviest first")
    operators = property(lambda self: self.table("operators"), doc="torch.profiler's CPU operators, heaviest self "
                         "time first: self_ns, percent (of the sum of self times), total_ns (inclusive)")
    annotations = property(lambda self: self._annotations(), doc="record_function ranges and ProfilerStep#N "
                           "per rank: calls, total_ns, self_ns, gpu_ns (GPU time launched inside), min_ns, max_ns")
    user_ranges = property(lambda self: self.table("annotations"), doc="annotations without the ProfilerStep#N rows")
    profiler_steps = property(lambda self: self.table("profiler_steps"), doc="the ProfilerStep#N rows alone")
    api_calls = property(lambda self: self.table("api"), doc="runtime API calls (hipLaunchKernel, cudaMalloc, ...)")
    copies = property(lambda self: self.table("memory_copies"), doc="memory copies and sets")
    counters = property(lambda self: self.table("counters"), doc="kernel, then one column per counter/metric")
    ranks = property(lambda self: self.table("ranks"), doc="one row per rank: total_ns, collective_percent, ...")
    steps = property(lambda self: self.table("steps"), doc="one row per ProfilerStep: wall_ns, gpu_busy_ns, ...")
    operator_roofline = property(lambda self: self.table("operator_roofline"), doc="operators recorded with shapes "
                                 "(trace --shapes): FLOP, minimum bytes, achieved flop_per_s, intensity, % of roof, verdict")
    collective_calls = property(lambda self: self.table("collective_calls"), doc="each collective call: kind, group, "
                                "bytes, algbw/busbw (nccl-tests), exposed/hidden ns, late_ns, last")
    memory = property(lambda self: self.table("memory_by_category"), doc="torch's memory history (trace --memory): "
                      "what held the peak, per rank, device and category")
    gaps = property(lambda self: self.table("idle_gaps"), doc="the largest idle gaps of the GPU timeline")
    timeline = property(lambda self: self.table("timeline"), doc="busy, idle, overlap, launches per rank and all")
    power = property(lambda self: self.table("power"), doc="one row per GPU: avg_power_w, energy_j, ...")
    power_samples = property(lambda self: self.table("power_samples"), doc="gpu, time_s, power_w")
    timing = property(lambda self: self.table("timing"), doc="timed runs (profile): mean_s, median_s, ...")

    @property
    def metadata(self) -> dict[str, str]:
        """Date, host, GPU, driver, versions, tool, command: what the report's heading shows."""
        return dict(self.document.metadata)

    # ------------------------------------------------------------ per rank
    @functools.cached_property
    def rank_runs(self) -> dict[str, "Run"]:
        """Each rank on its own, the ranks of the report's ranks table: a job's rank runs, a folder's
        files grouped by the rank their names give, or, where one file holds several ranks (an
        Nsight Systems report of several processes, an XLA trace of eight devices) or the files' names
        give none (traces named by their tool), each rank's own timeline. One process: itself."""
        from profilectl.read.load import per_rank
        ranks = {row.rank for row in self.summary.ranks}
        found = per_rank(self.path)
        if ranks and set(found) != ranks:
            found = _per_rank_of_timelines(self.path, ranks) or found
        return {rank: Run(self.path, summary) for rank, summary in found.items()} if found else {"0": self}

    def rank(self, rank: str | int) -> "Run":
        return self.rank_runs[str(rank)]

    def _by_rank(self, key: str) -> "pl.DataFrame":
        pl = _polars()
        parts = [run.table(key).select(pl.lit(rank).alias("rank"), pl.all())
                 for rank, run in self.rank_runs.items() if run.table(key).height]
        return pl.concat(parts, how="diagonal_relaxed") if parts else pl.DataFrame()

    kernels_by_rank = property(lambda self: self._by_rank("kernels"), doc="kernels with a rank column, per rank")
    operators_by_rank = property(lambda self: self._by_rank("operators"), doc="operators with a rank column")

    # ------------------------------------------------------------ SQL, rendering
    def sql(self, query: str) -> "pl.DataFrame":
        """A SQL query (SQLite's dialect) over the tables, as `profilectl query` runs it."""
        from profilectl.report.query import run_query
        columns, rows = run_query(self.document, query)
        return _polars().DataFrame([dict(zip(columns, r)) for r in rows], schema=columns, orient="row",
                                   strict=False) if rows else _polars().DataFrame(schema=columns)

    def render(self, fmt: str = "md", top: int = 10) -> str:
        from profilectl.report.renderers import render
        return render(self.document, fmt, top)

    def _repr_html_(self) -> str:
        from profilectl.report.renderers import html
        return html.render(self.document, 15)


def _per_rank_of_timelines(path: Path, ranks: set[str]) -> dict[str, "Summary"]:
    """Each rank's report from its own timeline (its kernels and copies, event by event), its
    annotations, collectives and rank row: where the files do not split by rank but their events do.
    Empty unless every rank of `ranks` has a timeline."""
    from profilectl.model.timeline import COPY, KERNEL
    from profilectl.analysis.windows import stats_by_kind
    from profilectl.formats.registry import READERS
    from profilectl.formats.reader import read_groups, recognised
    from profilectl.model.tables import PER_DISPATCH, Tables, merge_stats
    from profilectl.read.load import is_run_dir
    from profilectl.read.summary import SourceInfo, build
    groups = recognised(path / "raw" if is_run_dir(path) else path, READERS)
    tables = read_groups(groups)
    if {t.rank for t in tables.timelines} != ranks:
        return {}
    kinds = "+".join(dict.fromkeys(reader.kind for reader, _ in groups))
    files = tuple(str(f) for _, group in groups for f in group)
    out = {}
    for rank in sorted(ranks):
        mine = tuple(t for t in tables.timelines if t.rank == rank)
        per_kind = [stats_by_kind(t) for t in mine]
        kernels = merge_stats(*(k[KERNEL] for k in per_kind))
        part = Tables(kernels=kernels, kernel_detail=PER_DISPATCH if kernels else 0,
                      memory_copies=merge_stats(*(k[COPY] for k in per_kind)), timelines=mine,
                      annotations=tuple(a for a in tables.annotations if a.rank == rank),
                      ranks=tuple(r for r in tables.ranks if r.rank == rank),
                      collectives=tuple(c for c in tables.collectives if c.rank == rank),
                      clocks=tuple(c for c in tables.clocks if c.rank == rank))
        out[rank] = build(part, SourceInfo(kind=kinds, path=f"{path} (rank {rank})", files=files))
    return out


def open(path: str | Path, *, range_name: str | None = None, steps: str | None = None,  # noqa: A001
         step_mark: str | None = None) -> Run:
    """A run directory, a SLURM job directory, or any folder or file rocprofv3, rocprof, ncu or
    torch.profiler wrote: the same reading as `profilectl report` (profilectl.open, as the issue
    names it); as there, a run id as `ls` prints it or `latest` is a run of the traces folder.
    range_name / steps ("A:B") / step_mark: as `report --range / --steps / --step-mark`."""
    from profilectl.read.listing import find_run
    from profilectl.runs import default_traces_root
    path = find_run(str(path), default_traces_root())
    if range_name is not None or steps is not None or step_mark is not None:
        from profilectl.analysis.windows import WindowRequest, parse_steps
        from profilectl.read.load import load_window
        request = WindowRequest(range_name=range_name, steps=parse_steps(steps) if steps is not None else None,
                                step_mark=step_mark)
        return Run(Path(path), load_window(Path(path), request))
    from profilectl.read.load import load
    return Run(Path(path), load(Path(path)))


@dataclasses.dataclass(frozen=True)
class Compared:
    """Two runs kernel by kernel (`profilectl compare`'s numbers), as DataFrames."""
    result: "Comparison"

    def _frame(self, rows: Sequence[Any], row_type: type) -> "pl.DataFrame":
        """The rows as a frame; no rows: an empty frame with the row type's columns, never none."""
        pl = _polars()
        if rows:
            return pl.DataFrame([dataclasses.asdict(r) for r in rows])
        return pl.DataFrame({f.name: [] for f in dataclasses.fields(row_type)})

    kernels = property(lambda self: self._frame(self.result.kernels, _compare_types()["Matched"]),
                       doc="name, calls_a, calls_b, total_ns_a, total_ns_b, delta_ns, speedup (largest change first)")
    operators = property(lambda self: self._frame(self.result.operators, _compare_types()["MatchedOperator"]),
                         doc="CPU operators: calls_a/b, self_ns_a/b, total_ns_a/b (inclusive), delta_ns and "
                             "speedup of self time")
    ranks = property(lambda self: self._frame(self.result.ranks, _compare_types()["RankDelta"]),
                     doc="rank, total_ns_a, total_ns_b, speedup")
    only_in_a = property(lambda self: self._frame(self.result.only_in_a, _compare_types()["OnlyIn"]))
    only_in_b = property(lambda self: self._frame(self.result.only_in_b, _compare_types()["OnlyIn"]))
    timing = property(lambda self: self._frame(self.result.timing, _compare_types()["TimingDelta"]))

    @property
    def gate(self) -> "Gate | None":
        return self.result.gate


def _compare_types() -> dict[str, type]:
    from profilectl.report.compare import Matched, MatchedOperator, OnlyIn, RankDelta, TimingDelta
    return {"Matched": Matched, "MatchedOperator": MatchedOperator, "OnlyIn": OnlyIn, "RankDelta": RankDelta,
            "TimingDelta": TimingDelta}


def compare(a: "Run | str | Path", b: "Run | str | Path", match: str = "exact", metric: str | None = None,
            fail_if_slower: float | None = None) -> Compared:
    """BASE a against NEW b, as `profilectl compare` (and its gate when metric or fail_if_slower is given)."""
    from profilectl.report.compare import compare as compare_summaries
    from profilectl.report.compare import gate
    base = a if isinstance(a, Run) else open(a)
    new = b if isinstance(b, Run) else open(b)
    result = compare_summaries(base.summary, new.summary, match)
    if metric is not None or fail_if_slower is not None:
        result = dataclasses.replace(result, gate=gate(base.summary, new.summary, metric, fail_if_slower))
    return Compared(result)


@dataclasses.dataclass(frozen=True)
class RunResult:
    """What `profilectl profile|counters|trace --json` prints, and the run opened."""
    exit_code: int
    status: str
    message: str
    run_dir: Path

    def open(self) -> Run:
        return open(self.run_dir)


def run(service: str, args: Sequence[str] = (), *, stream_output: bool = True) -> "RunResult | Plan":
    """Start a run as the CLI does, with the CLI's options: `run("trace", ["--preset", "api", "--",
    "python3", "x.py"])` is `profilectl trace --preset api -- python3 x.py` (the same request, plan
    and execution; `--dry-run` returns the Plan). Errors raise profilectl.errors.ProfilectlError
    (its exit_code is the CLI's)."""
    from profilectl import cli, measuring
    from profilectl.errors import UsageError
    if service not in ("profile", "counters", "trace"):
        raise UsageError(f"run: {service!r} is not a measuring service (profile, counters, trace)")
    parsed = cli.parse([service, *args])
    prepared = measuring.prepare(cli.run_options(parsed))
    if parsed.dry_run:
        return prepared.plan.redacted()
    from profilectl.runner import terminal_streams
    streams = terminal_streams(quiet_stdout=False) if stream_output else (None, None)
    outcome = measuring.execute_prepared(prepared, streams, quiet=parsed.quiet)
    return RunResult(exit_code=outcome.exit_code, status=outcome.status, message=outcome.message,
                     run_dir=outcome.run_dir)
