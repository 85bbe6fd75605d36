"""Nsight Compute's CSV, both pages of it, as `--log-file` writes it and as users redirect it:

- the details page (`ncu --csv ...`, `--section SpeedOfLight --csv`): one row per kernel launch and
  metric, "Section Name", "Metric Name", "Metric Unit", "Metric Value" (with --section, the
  section's display names: "Memory Throughput" %, "Duration" usecond, "SM Frequency" Ghz ...; rule
  rows with an empty metric);
- the raw page (`--page raw`): one row per launch, one column per metric (ncu's own names,
  `sm__throughput.avg.pct_of_peak_sustained_elapsed`), their units in the row under the header.

`ncu --csv ... > out.csv` leaves ncu's own lines (`==PROF== Connected to process ...`,
`==WARNING==`, `==ERROR==`) and the program's output before and among the CSV: the CSV starts at
its header, and the lines that are not ncu's quoted rows are left out. `.ncu-rep` reports are read
through `ncu --import REPORT --csv --page raw` where ncu is installed.

Each launch's values become CounterValues (kept whole, so each metric is aggregated by its kind
after files and ranks merge: countersets.aggregation); its duration (gpu__time_duration.sum, or the
SpeedOfLight section's "Duration") gives the kernel table and the duration weights."""

from __future__ import annotations

import csv
import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from profilectl.errors import FormatError, UnavailableError
from profilectl.formats.reader import Reader
from profilectl.model.tables import DURATION_METRIC, CounterValue, KernelStats, StatsByName, Tables

DURATION_METRICS = ("gpu__time_duration.sum", "Duration")  # the raw name; the SpeedOfLight section's label
_TO_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9}
TOOL_LINE = re.compile(r"^==[A-Z]+==")  # ==PROF==, ==WARNING==, ==ERROR==
HEADER_SCAN = 4 << 20  # bytes a recogniser reads at most looking for the CSV's header
# The raw page's columns that say which launch a row is, not what it measured
LAUNCH_COLUMNS = frozenset({"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context",
                            "Stream", "Block Size", "Grid Size", "Device", "CC", "Section Name", "Metric Name",
                            "Metric Unit", "Metric Value", "Rule Name", "Rule Type", "Rule Description",
                            "Estimated Speedup Type", "Estimated Speedup"})
REPORT_SUFFIX = ".ncu-rep"
IMPORT_TIMEOUT_S = 900.0
INSTALL_PATHS = ("/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda/bin/ncu")


@dataclass
class ProfiledLaunch:
    """One profiled kernel launch: its metric values and, when collected, its duration."""
    kernel: str
    values: dict[str, tuple[float, str]] = field(default_factory=dict)  # metric -> (value, unit)

    @property
    def duration_ns(self) -> float | None:
        for metric in DURATION_METRICS:
            found = self.values.get(metric)
            if found:
                return found[0] * _TO_NS.get(found[1], 1.0)
        return None


def _fields(line: str) -> list[str]:
    try:
        return next(csv.reader([line]), [])
    except csv.Error:
        return []


def is_header(fields: list[str]) -> bool:
    """ncu's CSV header, of either page: it names the kernel, and the metric (details) or the launch (raw)."""
    return "Kernel Name" in fields and ("Metric Name" in fields or "ID" in fields)


def csv_lines(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """(line number, line) of the CSV among the file's lines: from its header on; ncu's own lines,
    the program's output (not a quoted row) and the header repeated (one table per process) left out."""
    header: str | None = None
    for number, line in enumerate(lines, start=1):
        if TOOL_LINE.match(line):
            continue
        if header is None:
            if line.startswith('"') and is_header(_fields(line)):
                header = line
                yield number, line
            continue
        if line == header or not line.startswith('"'):
            continue
        yield number, line


def _number(text: str) -> float | None:
    """A metric's value as ncu prints it ("10,496", "3.2"); None for text ("n/a", "PolicySpread")."""
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        return None
    return value if value == value and value not in (float("inf"), float("-inf")) else None


def launches_of(name: str, lines: Iterable[str]) -> list[ProfiledLaunch]:
    """Rows grouped by launch (the ID column, per process), from the details page or the raw page."""
    numbered = csv_lines(lines)
    first = next(numbered, None)
    if first is None:
        raise FormatError(f"{name}: no Nsight Compute CSV header (a row naming \"Kernel Name\") in it")
    header = _fields(first[1])
    width = len(header)
    by_id: dict[tuple[str, str], ProfiledLaunch] = {}
    details = "Metric Name" in header
    units: dict[str, str] = {}
    for number, line in numbered:
        fields = _fields(line)
        # a row ends with its last value's quote (or a comma where ncu leaves the rule columns out)
        if not line.endswith(('"', ",")) or len(fields) < min(width, header.index("Kernel Name") + 1):
            raise FormatError(f"{name}:{number}: truncated or malformed row")
        row = dict(zip(header, fields))
        if not details and not row.get("ID") and not row.get("Kernel Name"):  # the raw page's units row
            units = {column: unit for column, unit in row.items() if column not in LAUNCH_COLUMNS}
            continue
        key = (row.get("Process ID") or "", row.get("ID") or f"row {number}")
        launch = by_id.setdefault(key, ProfiledLaunch(row.get("Kernel Name", "")))
        if details:
            if "Metric Value" not in row:
                raise FormatError(f"{name}:{number}: truncated or malformed row")
            value = _number(row["Metric Value"])
            if row.get("Metric Name") and value is not None:
                launch.values[row["Metric Name"]] = (value, row.get("Metric Unit", "") or "")
            continue
        for column, text in row.items():
            if column not in LAUNCH_COLUMNS and (value := _number(text)) is not None:
                launch.values[column] = (value, units.get(column, ""))
    return list(by_id.values())


def launches(path: Path) -> list[ProfiledLaunch]:
    try:
        with open(path, newline="", errors="replace") as fh:
            return launches_of(str(path), (line.rstrip("\r\n") for line in fh))
    except OSError as exc:
        raise FormatError(f"{path}: cannot read ({exc.strerror})") from None


def metrics(launched: list[ProfiledLaunch]) -> tuple[CounterValue, ...]:
    """Per (kernel, metric): every launch's value with that launch's duration (weights for means)."""
    values: dict[tuple[str, str], list[tuple[float, float | None]]] = {}
    units: dict[str, str] = {}
    for launch in launched:
        for metric, (value, unit) in launch.values.items():
            values.setdefault((launch.kernel, metric), []).append((value, launch.duration_ns))
            units[metric] = unit
    return tuple(CounterValue.of(kernel, metric, items, units[metric]) for (kernel, metric), items in values.items())


def kernels(launched: list[ProfiledLaunch]) -> StatsByName:
    """Kernel times from each launch's duration, when it was collected."""
    stats: StatsByName = {}
    for launch in launched:
        duration = launch.duration_ns
        if duration is not None:
            stats.setdefault(launch.kernel, KernelStats()).add(duration)
    return stats


def is_ncu_csv(path: Path) -> bool:
    """A .csv (.log, .txt: what users redirect ncu's output into) whose lines, past ncu's own and the
    program's, reach ncu's header."""
    if path.suffix not in (".csv", ".log", ".txt"):
        return False
    try:
        with open(path, newline="", errors="replace") as fh:
            read = 0
            for line in fh:
                read += len(line)
                if line.startswith('"') and is_header(_fields(line.rstrip("\r\n"))):
                    return True
                if read > HEADER_SCAN:
                    return False
    except OSError:
        return False
    return False


# ------------------------------------------------------------------ .ncu-rep through ncu --import
def find_ncu() -> str | None:
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in INSTALL_PATHS:
        for candidate in sorted(glob.glob(pattern), reverse=True):
            if os.access(candidate, os.X_OK):
                return candidate
    return None


def import_argv(ncu: str, report: Path) -> list[str]:
    return [ncu, "--import", str(report), "--csv", "--page", "raw"]


def imported(report: Path) -> tuple[list[ProfiledLaunch], list[str]]:
    """A report's launches from `ncu --import REPORT --csv --page raw`, and that argv; ncu missing is
    one UnavailableError line saying what to do."""
    ncu = find_ncu()
    if ncu is None:
        raise UnavailableError(f"{report}: a {REPORT_SUFFIX} report is read through `ncu --import` and ncu is not on "
                               "PATH: add Nsight Compute's folder to PATH, or export it where ncu is (ncu --import "
                               f"{report.name} --csv --page raw > {report.stem}.csv) and read the .csv")
    argv = import_argv(ncu, report)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=IMPORT_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise FormatError(f"{report}: ncu --import took more than {IMPORT_TIMEOUT_S:.0f} s") from None
    except OSError as exc:
        raise UnavailableError(f"{report}: could not start {ncu} ({exc.strerror})") from None
    if done.returncode != 0:
        lines = (done.stderr or done.stdout or "").strip().splitlines()
        raise FormatError(f"{report}: ncu --import failed: {lines[-1] if lines else f'exit code {done.returncode}'}")
    return launches_of(str(report), done.stdout.splitlines()), argv


def _tables(launched: list[ProfiledLaunch], notes: tuple[str, ...] = ()) -> Tables:
    timed = kernels(launched)
    return Tables(kernels=timed, kernel_detail=DURATION_METRIC if timed else 0, counters=metrics(launched),
                  kernel_timing="Nsight Compute kernel replay (clock control not recorded in the CSV; ncu's "
                                "default locks clocks to base)" if timed else "", notes=notes)


class NcuCsvReader(Reader):
    kind = "ncu-csv"

    def recognises(self, path: Path) -> bool:
        return path.suffix == REPORT_SUFFIX or is_ncu_csv(path)

    def read_file(self, path: Path) -> Tables:
        if path.suffix == REPORT_SUFFIX:
            launched, argv = imported(path)
            shown = " ".join([Path(argv[0]).name, *argv[1:2], path.name, *argv[3:]])
            return _tables(launched, (f"{path.name} read through `{shown}`",))
        return _tables(launches(path))


# Launch statistics (Nsight Compute's LaunchStatistics and Occupancy sections): ncu --metrics takes
# them, --query-metrics does not list them (it lists hardware counters only).
LAUNCH_METRICS = frozenset({"launch__waves_per_multiprocessor", "launch__grid_size", "launch__block_size",
                            "launch__registers_per_thread", "launch__sm_count", "launch__occupancy_limit_warps",
                            "launch__occupancy_limit_registers", "launch__occupancy_limit_shared_mem",
                            "launch__occupancy_limit_blocks", "launch__shared_mem_per_block"})


def available_metrics(query_output: str) -> set[str]:
    """Base metric names from `ncu --query-metrics` (a table: name, description, ...)."""
    names = set()
    for line in query_output.splitlines():
        first = line.split(None, 1)[0] if line.strip() else ""
        if "__" in first and not first.startswith("-"):
            names.add(first)
    return names | LAUNCH_METRICS if names else names  # launch statistics: accepted, never listed


def metric_base(metric: str) -> str:
    """'sm__warps_launched.sum' -> 'sm__warps_launched' (query-metrics lists bases; suffixes roll up)."""
    return metric.split(".", 1)[0]
