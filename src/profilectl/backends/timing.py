"""Plain timing: warm-up plus repeated runs of the workload, wall clock per run.

Needs nothing but the workload, so it is every service's last fallback. It records the runs as
timing.json and as a Chrome trace, so even a timing-only run opens in Perfetto.

How many runs: `--repeat N` (and `--warmup N`) as given; without them the repeats are sized to the
workload, as benchmarking tools do (hyperfine's time budget, timeit's autorange): the first run is
the warm-up and measures the workload, then as many timed runs follow as fit the time budget
(RepeatSizing, repeat_sizing). A first run too long for even the fewest repeats is the one measurement: a
training job runs once, its steps' times separate its warm-up steps from the steady ones.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from profilectl import settings
from profilectl.backends.base import Backend, Job, SizedRuns, Step, StepResult, rank_hook_env, unsupported
from profilectl.facts import Facts, Verdict
from profilectl.files import write_text_atomic
from profilectl.formats import timing as reader
from profilectl.formats.rank_status import RankStatusReader
from profilectl.request import Request

STEPS_DIR = "steps"  # the hook's status files of the timed runs, with their step ends


@dataclass(frozen=True)
class RepeatSizing:
    """How many timed runs fit: about `budget_s` of timed runs, at least `min_runs` and at most
    `max_runs`. A first run longer than budget_s / min_runs is measured once (the whole budget
    would not give a spread worth another run of a long job)."""
    budget_s: float = 10.0  # hyperfine's is 3 s; a GPU program's start-up alone is often 1 s
    min_runs: int = 3  # a median and a spread
    max_runs: int = 30  # each run costs profilectl a supervised process (~0.05 s): bounded for tiny programs

    @property
    def long_run_s(self) -> float:
        return self.budget_s / self.min_runs

    def runs(self, first_s: float) -> int:
        """Timed runs for a workload whose first run took first_s; 0: the first run is the measurement."""
        if first_s > self.long_run_s:
            return 0
        return max(self.min_runs, min(self.max_runs, int(self.budget_s // max(first_s, 1e-3))))

    def describe(self) -> str:
        return (f"repeats sized to the workload: the first run is the warm-up and sizes the rest, timed runs for "
                f"about {self.budget_s:g} s ({self.min_runs} to {self.max_runs}); a first run over "
                f"{self.long_run_s:.1f} s is the only one (--repeat N to choose)")


def in_job_step() -> bool:
    """profilectl runs as one task of a SLURM job step (jobs.SlurmTask.from_env's condition, without
    its look-ups): each rank sizes nothing on its own."""
    env = os.environ
    return not settings.get_bool("PROFILECTL_NO_JOB", env) and all(
        env.get(k) for k in ("SLURM_JOB_ID", "SLURM_PROCID", "SLURM_STEP_ID"))


BUDGET_ENV = "PROFILECTL_REPEAT_BUDGET_S"  # the time budget of sized repeats, in seconds (default 10)


def repeat_sizing() -> RepeatSizing:
    """The sizing rule, with $PROFILECTL_REPEAT_BUDGET_S as its budget when set (0 or less: the default)."""
    budget = settings.get_float(BUDGET_ENV)  # a value that is not a number: one line, before the run
    return RepeatSizing(budget_s=budget if budget is not None and budget > 0 else RepeatSizing.budget_s)


class Timing(Backend):
    name = "timing"
    services = frozenset({"profile", "trace"})
    readers = (reader.TimingReader(), RankStatusReader())

    def available(self, facts: Facts, request: Request) -> Verdict:
        if (refusal := self.unavailable_unless_service(request)):
            return refusal
        if request.service == "trace":
            return Verdict(True, "wall-clock timeline of the workload's runs (no GPU activity)")
        return Verdict(True, "wall-clock timing needs no profiler")

    def steps(self, job: Job) -> tuple[Step, ...]:
        request = job.request
        if request.bounds.any:
            raise unsupported("timing", "bounded profiling (--kernel, --launch-*, --steps, --range, --profiler-args)",
                              "it times whole runs of the workload; no GPU profiler is available here")
        if request.service == "trace":
            return (self._run(job, 1, "run 1/1"),)
        if request.repeat is None and in_job_step():  # every rank must run the same count: one run
            warmup = request.warmup or 0
            return tuple([self._warmup(job, i + 1, f"warmup {i + 1}/{warmup}") for i in range(warmup)]
                         + [self._run(job, 1, "run 1/1")])
        warmup = 1 if request.warmup is None else request.warmup
        if request.repeat is None:  # sized after the first run (sized_steps): only that run is planned here
            first = "(also sizes the repeats)"
            if warmup == 0:
                return (self._run(job, 1, f"run 1 {first}"),)
            return tuple(self._warmup(job, i + 1, f"warmup {i + 1}/{warmup}" + (f" {first}" if i + 1 == warmup else ""))
                         for i in range(warmup))
        steps = [self._warmup(job, i + 1, f"warmup {i + 1}/{warmup}") for i in range(warmup)]
        steps += [self._run(job, i + 1, f"run {i + 1}/{request.repeat}") for i in range(request.repeat)]
        return tuple(steps)

    @staticmethod
    def _status_env(job: Job, folder: str) -> dict[str, str]:
        """Each run's step marks in a folder of its own (a Python workload's, through the start-up hook)."""
        return {"PROFILECTL_STATUS_OUT": str(Path(job.raw_dir) / STEPS_DIR / folder)} if job.launch.python_ranks else {}

    def _run(self, job: Job, index: int, label: str) -> Step:
        return Step(job.request.workload, label, env=self._status_env(job, f"run-{index}"), timed=True)

    def _warmup(self, job: Job, index: int, label: str) -> Step:
        return Step(job.request.workload, label, env=self._status_env(job, f"warmup-{index}"), warmup=True)

    def plan_notes(self, request: Request, facts: Facts) -> list[str]:
        notes = super().plan_notes(request, facts)
        if request.service == "profile" and request.repeat is None and in_job_step():
            notes.append("one timed run: in a SLURM job step every rank runs its own profilectl, and counts sized "
                         "apart could differ and leave a rank waiting for the others (--repeat N for more)")
        elif request.service == "profile" and request.repeat is None:
            notes.append(repeat_sizing().describe())
        return notes

    def sized_steps(self, job: Job, done: list[StepResult]) -> SizedRuns | None:
        """The timed runs that follow the first run(s) when the repeats are sized to the workload."""
        request = job.request
        if request.service != "profile" or request.repeat is not None or not done or in_job_step():
            return None
        sizing = repeat_sizing()
        first_s = done[-1].seconds
        timed = sum(1 for r in done if r.timed)
        runs = sizing.runs(first_s)
        if runs == 0 and timed == 0 and request.warmup is None:
            # A long job: its one run (the default warm-up) is the measurement. Its step marks move to
            # a timed run's folder, where the step-time reader looks.
            warm, run = Path(job.raw_dir) / STEPS_DIR / "warmup-1", Path(job.raw_dir) / STEPS_DIR / "run-1"
            if warm.is_dir() and not run.exists():
                os.rename(warm, run)
            return SizedRuns((), first_is_run=True, replaces=sizing.describe(), note=(
                f"one run: the first took {first_s:.1f} s, over {sizing.long_run_s:.1f} s, so it is the "
                f"measurement (warm-up steps apart in the step times); --repeat N runs more"))
        total = max(runs, 1)
        steps = tuple(self._run(job, i, f"run {i}/{total}") for i in range(timed + 1, total + 1))
        return SizedRuns(steps, replaces=sizing.describe(),
                         note=f"{total} timed run(s): the first run took {first_s:.2f} s; about "
                                     f"{sizing.budget_s:g} s of timed runs ({sizing.min_runs} to "
                                     f"{sizing.max_runs}); --repeat N to choose")

    def environment(self, job: Job) -> dict[str, str]:
        """A Python workload's steps are timed too: profilectl's start-up hook notes when each
        optimizer.step() or profilectl.step() ends (no profiler: a clock read per step)."""
        env = super().environment(job)
        if job.launch.python_ranks:
            env.update(rank_hook_env(job))  # each step's PROFILECTL_STATUS_OUT says where it writes
        return env

    def record(self, raw_dir: Path, results: list[StepResult]) -> None:
        timed = [r.seconds for r in results if r.timed and r.returncode == 0]
        if not timed:
            return
        write_text_atomic(raw_dir / reader.RESULTS, json.dumps({"runs_s": timed}, indent=1) + "\n")
        events, clock = [], 0.0
        for r in results:
            events.append({"name": r.label, "ph": "X", "ts": clock * 1e6, "dur": r.seconds * 1e6,
                           "pid": 1, "tid": 1, "cat": "warmup" if r.warmup else "run",
                           "args": {"argv": " ".join(r.argv), "exit_code": r.returncode}})
            clock += r.seconds
        write_text_atomic(raw_dir / reader.TRACE, json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
