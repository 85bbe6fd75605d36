"""Plain timing: warm-up plus repeated runs of the workload, wall clock per run.

Needs nothing but the workload, so it is every service's last fallback. Its timeline of runs is
written as a Chrome trace so even a timing-only run opens in Perfetto.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from profilectl.backends.base import Backend, Collected, Step, StepResult
from profilectl.probe.report import EnvReport, Verdict
from profilectl.request import Request

TRACE = "timing_trace.json"


def summarize(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    p95_index = max(0, min(len(ordered) - 1, round(0.95 * (len(ordered) - 1))))
    return {"runs": len(ordered), "mean_s": statistics.fmean(ordered), "median_s": statistics.median(ordered),
            "p95_s": ordered[p95_index], "min_s": ordered[0], "max_s": ordered[-1],
            "std_s": statistics.pstdev(ordered) if len(ordered) > 1 else 0.0}


class Timing(Backend):
    name = "timing"
    services = frozenset({"profile", "trace"})

    def available(self, env: EnvReport, request: Request) -> Verdict:
        if (refusal := self.unavailable_unless_service(request)):
            return refusal
        if request.service == "trace":
            return Verdict(True, "wall-clock timeline of the workload's runs (no GPU activity)")
        return Verdict(True, "wall-clock timing needs no profiler")

    def steps(self, request: Request, env: EnvReport, raw_dir: Path) -> list[Step]:
        repeat = 1 if request.service == "trace" else request.repeat
        warmup = 0 if request.service == "trace" else request.warmup
        steps = [Step(list(request.workload), f"warmup {i + 1}/{warmup}", warmup=True) for i in range(warmup)]
        steps += [Step(list(request.workload), f"run {i + 1}/{repeat}", timed=True) for i in range(repeat)]
        return steps

    def collect(self, raw_dir: Path, request: Request, results: list[StepResult]) -> Collected:
        out = Collected()
        timed = [r for r in results if r.timed and r.returncode == 0]
        if not timed:
            out.produced_output = False
            return out
        out.tables["timing"] = [{"run": i + 1, "seconds": r.seconds} for i, r in enumerate(timed)]
        out.tables["timing_summary"] = [summarize([r.seconds for r in timed])]
        (raw_dir / "timing.json").write_text(json.dumps(out.tables, indent=1))
        events, clock = [], 0.0
        for r in results:
            events.append({"name": r.label, "ph": "X", "ts": clock * 1e6, "dur": r.seconds * 1e6,
                           "pid": 1, "tid": 1, "cat": "warmup" if r.warmup else "run",
                           "args": {"argv": " ".join(r.argv), "exit_code": r.returncode}})
            clock += r.seconds
        (raw_dir / TRACE).write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
        out.trace_file = str((raw_dir / TRACE).relative_to(raw_dir.parent))
        return out
