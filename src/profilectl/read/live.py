"""Following a run while it runs: the ranks' steps.jsonl (written by the start-up hook as each step
ends) and the run's telemetry.csv (the sampler's rows), each read on from where the last poll
stopped; a last line still being written waits for the next poll. Read-only: nothing is written
into the run (`profilectl watch` may look at someone else's run on a shared folder).

A run directory, or a SLURM job folder (each rank's run directory inside it). The step marks of
one process live in one folder (raw/ for a trace, raw/steps/run-<N>/ for each timed run of
`profile`, raw/live-steps/ for a GPU tracer): the folder written to last is the one shown.
"""

from __future__ import annotations

import collections
import json
import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Deque, TypeGuard

from profilectl import errors, jobs
from profilectl.analysis.live import GpuNow, LiveState, RankMarks, StepMark, assess, gpu_of
from profilectl.manifest import Manifest
from profilectl.runstate import run_state
from profilectl.telemetry.energy import row_parser
from profilectl.telemetry.model import CSV_NAME

if TYPE_CHECKING:
    from profilectl.telemetry.energy import Sample

STEPS_NAME = re.compile(r"^rank-(?P<rank>[^-]+)-(?P<host>.+)-(?P<pid>\d+)\.steps\.jsonl$")
# where the hook's folders are, under a run directory (raw/, raw/<phase>/, raw/steps/run-<N>/): a
# bounded walk, never the whole tree of a profiler's output
STEPS_GLOBS = ("raw/rank-*.steps.jsonl", "raw/*/rank-*.steps.jsonl", "raw/*/*/rank-*.steps.jsonl")
KEEP_MARKS = 64  # per rank: the window and more, never the whole run
FIRST_READ_BYTES = 256 << 10  # a long run watched late: its last steps only
POLL_READ_BYTES = 4 << 20  # at most this much of one file per poll
HEAD_BYTES = 4096  # the first line (the steps file's who-am-I, the CSV header) is at most this long
LINE_MAX = 64 << 10  # a "line" longer than this without its end is not one of ours: dropped


class LineTail:
    """The complete lines a growing file gained since the last call. Opened per call (no descriptor
    held between polls), never through a link, never blocking on something that is not a file."""

    def __init__(self, path: Path):
        self.path = path
        self.offset: int | None = None  # None: not read yet
        self.pending = b""
        self.mtime_ns = 0

    def head(self) -> bytes | None:
        """The file's first line, once complete (None before)."""
        data = self._read_at(0, HEAD_BYTES)
        return data.split(b"\n", 1)[0] if data is not None and b"\n" in data else None

    def lines(self) -> list[bytes]:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return []
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return []
            self.mtime_ns = st.st_mtime_ns
            size = st.st_size
            if self.offset is None or size < self.offset:  # first read, or the file was written anew
                self.pending = b""
                self.offset = 0
                if size > FIRST_READ_BYTES:  # start near the end, at a line's start
                    self.offset = size - FIRST_READ_BYTES
                    skipped = os.pread(fd, LINE_MAX, self.offset)
                    cut = skipped.find(b"\n")
                    self.offset += cut + 1 if cut >= 0 else len(skipped)
            chunk = os.pread(fd, min(size - self.offset, POLL_READ_BYTES), self.offset) if size > self.offset else b""
        except OSError:
            return []
        finally:
            os.close(fd)
        self.offset += len(chunk)
        *complete, self.pending = (self.pending + chunk).split(b"\n")
        if len(self.pending) > LINE_MAX:
            self.pending = b""
        return complete

    def _read_at(self, offset: int, size: int) -> bytes | None:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            return os.pread(fd, size, offset) if stat.S_ISREG(os.fstat(fd).st_mode) else None
        except OSError:
            return None
        finally:
            os.close(fd)


class StepsFile:
    """One rank's rank-<R>-<host>-<pid>.steps.jsonl: who it is and its latest step ends."""

    def __init__(self, path: Path, rank: str, host: str, pid: int):
        self.path, self.rank, self.host, self.pid = path, rank, host, pid
        self.tail = LineTail(path)
        self.marks: Deque[StepMark] = collections.deque(maxlen=KEEP_MARKS)
        self.gpu: int | None = None
        self.known = False  # its first line was read

    def poll(self) -> None:
        if not self.known:
            head = self.tail.head()
            if head is not None:
                self.known = True
                who = _json(head)
                if who is not None and "step" not in who:
                    local, visible = who.get("local_rank"), who.get("visible_devices")
                    self.gpu = gpu_of(local if isinstance(local, int) and not isinstance(local, bool) else None,
                                      visible if isinstance(visible, str) else None)
        for line in self.tail.lines():
            doc = _json(line)
            step, unix, mono = (doc.get(k) for k in ("step", "end_unix_ns", "end_mono_ns")) if doc else (None,) * 3
            if _integer(step) and _integer(unix) and _integer(mono) and (not self.marks or step > self.marks[-1].step):
                self.marks.append(StepMark(step, unix, mono))

    @property
    def value(self) -> RankMarks:
        return RankMarks(rank=self.rank, host=self.host, pid=self.pid, marks=tuple(self.marks), gpu=self.gpu)

    @property
    def latest_ns(self) -> int:
        return self.marks[-1].end_unix_ns if self.marks else 0


class TelemetryFile:
    """A run's telemetry.csv: each GPU's latest row."""

    def __init__(self, path: Path, host: str | None):
        self.path, self.host = path, host
        self.tail = LineTail(path)
        self.parse: "Callable[[str], Sample | None] | None" = None
        self.latest: dict[int, GpuNow] = {}

    def poll(self) -> None:
        if self.parse is None:
            head = self.tail.head()
            if head is None:
                return
            self.parse = row_parser(head.decode(errors="replace"))
            if self.parse is None:
                return
        for line in self.tail.lines():
            sample = self.parse(line.decode(errors="replace"))  # the header itself does not parse: dropped
            if sample is not None:
                self.latest[sample.gpu] = GpuNow(host=self.host, gpu=sample.gpu, at_unix_ns=sample.timestamp_ns,
                                                 busy_pct=sample.utilization_pct, power_w=sample.power_w)


@dataclass
class _Run:
    """One run folder `watch` follows: its path, its host and its telemetry.csv as read so far."""
    path: Path
    host: str | None
    telemetry: TelemetryFile


class Monitor:
    """Polls a run directory or a job folder: `poll()` reads what was added and returns the state."""

    def __init__(self, path: Path):
        self.path = path
        self.is_job = False
        if not (path / "manifest.json").is_file():
            if not jobs.is_job_dir(path):
                raise errors.UsageError(f"{path}: not a profilectl run directory or SLURM job folder (no manifest.json)")
            self.is_job = True
        self.runs: dict[Path, _Run] = {}
        self.steps: dict[Path, StepsFile] = {}
        self.marks: tuple[RankMarks, ...] = ()  # what the last poll judged

    def run_dirs(self) -> list[Path]:
        return jobs.rank_dirs(self.path) if self.is_job else [self.path]

    def poll(self, now_unix_ns: int | None = None) -> LiveState:
        current: list[StepsFile] = []
        gpus: dict[tuple[str | None, int], GpuNow] = {}  # the ranks of a job on one node sample the same GPUs
        for run_dir in self.run_dirs():
            run = self.runs.get(run_dir)
            if run is None:
                host = _controller_host(run_dir)
                run = self.runs[run_dir] = _Run(run_dir, host, TelemetryFile(run_dir / CSV_NAME, host))
            run.telemetry.poll()
            for gpu in run.telemetry.latest.values():
                seen = gpus.get((gpu.host, gpu.gpu))
                if seen is None or gpu.at_unix_ns > seen.at_unix_ns:
                    gpus[(gpu.host, gpu.gpu)] = gpu
            current += self._current_steps(run_dir)
        latest: dict[str, StepsFile] = {}  # a rank started again (a restart): its newest process
        for found in current:
            if found.rank not in latest or found.latest_ns > latest[found.rank].latest_ns:
                latest[found.rank] = found
        self.marks = tuple(f.value for f in latest.values() if f.marks)
        return assess(self.marks, tuple(gpus.values()), now_unix_ns if now_unix_ns is not None else time.time_ns())

    def _current_steps(self, run_dir: Path) -> list[StepsFile]:
        """The step files of the folder written to last in this run (each file read on)."""
        folders: dict[Path, list[StepsFile]] = {}
        for pattern in STEPS_GLOBS:
            for path in run_dir.glob(pattern):
                match = STEPS_NAME.match(path.name)
                if match is None:
                    continue
                found = self.steps.get(path)
                if found is None:
                    found = self.steps[path] = StepsFile(path, match["rank"], match["host"], int(match["pid"]))
                folders.setdefault(path.parent, []).append(found)
        if not folders:
            return []
        for files in folders.values():  # every folder read on (new bytes only); the newest is shown
            for found in files:
                found.poll()
        return max(folders.values(), key=lambda files: max(f.tail.mtime_ns for f in files))

    def ended(self) -> str | None:
        """Why the run is over (its manifest says it ended, or its profilectl is gone), or None while
        it runs."""
        run_dirs = self.run_dirs()
        states = []
        for run_dir in run_dirs:
            try:
                manifest = Manifest.read(run_dir)
            except errors.ProfilectlError as exc:
                return f"{run_dir.name}: {exc}"
            status, said = run_state(run_dir, manifest)
            if status == "running":
                return None
            states.append(said or status)
        if self.is_job:
            try:
                expected = jobs.JobManifest.read(self.path).ntasks
            except (errors.ProfilectlError, OSError):
                expected = 0
            if not run_dirs or len(run_dirs) < expected:
                return None  # ranks that have not made their folder yet
            return f"the job's {len(run_dirs)} rank(s) ended: " + ", ".join(sorted(set(states)))
        return f"the run ended: {states[0]}" if states else None


def _controller_host(run_dir: Path) -> str | None:
    try:
        manifest = Manifest.read(run_dir)
    except (errors.ProfilectlError, OSError):
        return None
    return manifest.controller.hostname if manifest.controller else None


def _integer(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _json(line: bytes) -> dict[str, object] | None:
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None
