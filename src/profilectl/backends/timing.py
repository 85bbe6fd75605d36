"""Plain timing: warm-up plus repeated runs of the workload, wall clock per run.

Needs nothing but the workload, so it is every service's last fallback. It records the runs as
timing.json and as a Chrome trace, so even a timing-only run opens in Perfetto.
"""

from __future__ import annotations

import json
from pathlib import Path

from profilectl.backends.base import Backend, Job, Step, StepResult, rank_hook_env, unsupported
from profilectl.facts import Facts, Verdict
from profilectl.files import write_text_atomic
from profilectl.formats import timing as reader
from profilectl.formats.rank_status import RankStatusReader
from profilectl.request import Request

STEPS_DIR = "steps"  # the hook's status files of the timed runs, with their step ends


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
        repeat = 1 if request.service == "trace" else request.repeat
        warmup = 0 if request.service == "trace" else request.warmup
        python = job.launch.python_ranks

        def status_env(folder: str) -> dict[str, str]:  # each run's step marks in a folder of its own
            return {"PROFILECTL_STATUS_OUT": str(Path(job.raw_dir) / STEPS_DIR / folder)} if python else {}
        steps = [Step(request.workload, f"warmup {i + 1}/{warmup}", env=status_env(f"warmup-{i + 1}"), warmup=True)
                 for i in range(warmup)]
        steps += [Step(request.workload, f"run {i + 1}/{repeat}", env=status_env(f"run-{i + 1}"), timed=True)
                  for i in range(repeat)]
        return tuple(steps)

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
