#!/usr/bin/env python3
"""Are the diagnosis's rules pinned? A mutation run over its thresholds and formulas (issue 32).

    python3 bench/mutate_rules.py [--only thresholds|formulas] [-k NAME]

1. Thresholds: every number of profiling/verdicts.yaml's `thresholds` is moved both ways (halved
   and doubled; counts by one) in a copy of the file layered over the shipped one
   ($PROFILECTL_PROFILING_DIR), and the tests that hold the rules run against it.
2. Formulas: each mutation of FORMULAS (the exact merge of variances, busy clipped to a window, the
   steps' definition, exposed communication, the job's mean, the straggler's lead, the profiler's
   cost, GPU time with copies, ...) is applied to a copy of src/ and the same tests run.
A mutant is killed when a test fails; a survivor is a rule no test pins. Prints one line per mutant
and the survivors; exit 0 only when every mutant was killed. (mutmut would mutate every line of
analysis/: thousands of mutants at 20-60 s each on this 2-core machine; these are the lines whose
change would change a verdict or a figure.)
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTHON = REPO / ".venv" / "bin" / "python"
TESTS = ["tests/unit/test_rules_pinned.py", "tests/unit/test_exact_merge.py", "tests/unit/test_nccl_stragglers.py",
         "tests/unit/test_real_corpus.py", "tests/unit/test_timeline.py", "tests/unit/test_diagnosis.py",
         "tests/unit/test_compare_gate.py", "tests/unit/test_user_ranges.py", "tests/unit/test_live_model.py"]

# (file under src/profilectl, the text, its mutation, what it breaks)
FORMULAS = [
    ("model/tables.py", "self.m2 += other.m2 + delta * delta * self.calls * other.calls / calls",
     "self.m2 += other.m2", "the variance merge's cross-term"),
    ("model/tables.py", "m2=(count * total_sq - total * total) / count if count else 0.0",
     "m2=(total_sq - total * total) / count if count else 0.0", "M2 from exact integer sums"),
    ("analysis/intervals.py", "total -= max(0, low - int(self.start[first]))", "total -= 0",
     "busy clipped at a window's start"),
    ("analysis/intervals.py", "total -= max(0, int(self.end[stop - 1]) - high)", "total -= 0",
     "busy clipped at a window's end"),
    ("analysis/idle.py", "low = np.concatenate([np.array([frame_start], dtype=np.int64), busy[1]])",
     "low = np.concatenate([np.array([busy[0][0]], dtype=np.int64), busy[1]])",
     "a window's time before its first GPU activity is idle"),
    ("analysis/steps.py", "if gpu and len(gpu) > len(host) and _real_spans(gpu, host):",
     "if gpu and len(gpu) >= len(host):", "GPU-side markers are not the step"),
    ("analysis/steps.py", "REAL_SPAN_SHARE = 0.1", "REAL_SPAN_SHARE = 0.0", "a marker of a few µs is not a span"),
    ("analysis/steps.py", "return min(limit, max(steps // 4, 1 if steps >= 3 else 0))", "return min(limit, steps // 4)",
     "the first step of three is warm-up"),
    ("analysis/steps.py", "edges = {first - 1, first, end - 1, end}", "edges = set()",
     "the profiler's window edges pay its start and stop"),
    ("analysis/idle.py", "exposed = communication - intersection_length(intersection(comm, compute), window)",
     "exposed = communication", "exposed communication is what compute does not hide"),
    ("analysis/diagnosis.py", "busy_percent=sum(busy) / count", "busy_percent=max(busy)",
     "a job's busy is its ranks' mean"),
    ("analysis/diagnosis.py", "copy_share=rank.steady_copy_ns / busy if busy > 0 else 0.0",
     "copy_share=rank.steady_copy_ns / span if span else 0.0", "copies are a share of the busy time"),
    ("analysis/stragglers.py", "lead = int(statistics.median(others)) - waits[least]",
     "lead = int(statistics.median(others))", "the straggler's lead is the others' wait less its own"),
    ("analysis/timeline.py", "return np.where(linked, t.api_start[order][at], t.start)", "return t.start",
     "what a window launched is by launch correlation"),
    ("read/summary.py", "gpu_time_ns=kernel_ns + copy_ns", "gpu_time_ns=kernel_ns", "GPU time counts copies"),
    ("report/compare.py", "ka, kb = _keyed(a.kernels + a.memory_copies, key), _keyed(b.kernels + b.memory_copies, key)",
     "ka, kb = _keyed(a.kernels, key), _keyed(b.kernels, key)", "compare counts copies"),
    ("model/collectives.py", "return GPU_WORDS[0] in lowered or GPU_WORDS[1] in lowered",
     "return GPU_WORDS[0] in lowered", "RCCL kernels are collectives"),
    ("analysis/rank_stream.py", "return (float((width * open_[:-1]).sum() / total) if total else 0.0), int(open_.max())",
     "return (float((width * open_[1:]).sum() / total) if total else 0.0), int(open_.max())",
     "the launch queue depth between launches and ends"),
    ("analysis/live.py", "behind = [these[s].end_unix_ns - min(e[s].end_unix_ns for e in ends) for s in judged]",
     "behind = [these[s].end_unix_ns - ends[0][s].end_unix_ns for s in judged]",
     "a live lag is behind the earliest rank's step end, whichever rank that is"),
    ("analysis/live.py", "needed = max(floor, int(share * step)) if step else None",
     "needed = max(floor, int(share * lag)) if step else None", "the live share is of the rank's own step"),
]


def run_tests(env_extra: dict[str, str], cwd: Path) -> tuple[bool, str]:
    import os
    env = dict(os.environ, **env_extra)
    done = subprocess.run([str(PYTHON), "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *TESTS], cwd=cwd,
                          env=env, capture_output=True, text=True)
    failed = re.search(r"^FAILED (\S+)", done.stdout, re.MULTILINE)
    return done.returncode != 0, failed.group(1) if failed else done.stdout.strip().splitlines()[-1][:100]


def threshold_mutants() -> list[tuple[str, str, object]]:
    import yaml
    doc = yaml.safe_load((REPO / "profiling" / "verdicts.yaml").read_text())
    out = []
    for name, value in doc["thresholds"].items():
        if name.endswith("_reason") or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        counts = name in ("warmup_steps", "straggler_min_comparisons", "live_window_steps")
        for label, new in ((("-1", value - 1), ("+1", value + 1)) if counts else
                           (("x0.5", type(value)(value * 0.5)), ("x2", type(value)(value * 2)))):
            out.append((name, label, new))
    return out


def mutate_threshold(name: str, new: object, folder: Path, repo: Path = REPO) -> None:
    text = (repo / "profiling" / "verdicts.yaml").read_text()
    changed, count = re.subn(rf"^(  {re.escape(name)}:\s*)\S+", rf"\g<1>{new}", text, count=1, flags=re.MULTILINE)
    assert count == 1, name
    (folder / "verdicts.yaml").write_text(changed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("thresholds", "formulas"))
    parser.add_argument("-k", dest="keyword", help="only mutants whose name contains this")
    args = parser.parse_args()
    survivors, total = [], 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="profilectl-mutants-") as tmp:
        scratch = Path(tmp)
        # a copy of the checkout as it is now: the tree may change while the mutants run
        copy = scratch / "repo"
        # docs and README too: tests read them (the exit codes' table), and a test that fails for want
        # of a file would "kill" every mutant that reaches it
        for part in ("src", "tests", "profiling", "tools", "bench", "docs", "docker", "examples", "README.md",
                     "pyproject.toml"):
            source = REPO / part
            (shutil.copytree if source.is_dir() else shutil.copy2)(source, copy / part)
        if args.only != "formulas":
            for name, label, new in threshold_mutants():
                if args.keyword and args.keyword not in name:
                    continue
                folder = scratch / f"{name}{label}"
                folder.mkdir()
                mutate_threshold(name, new, folder, copy)
                killed, by = run_tests({"PROFILECTL_PROFILING_DIR": str(folder), "PYTHONPATH": str(copy / "src")}, copy)
                total += 1
                print(f"{'killed  ' if killed else 'SURVIVED'} threshold {name} {label} ({new}): {by}", flush=True)
                if not killed:
                    survivors.append(f"threshold {name} {label}")
        if args.only != "thresholds":
            for relative, old, new, what in FORMULAS:
                if args.keyword and args.keyword not in what:
                    continue
                target = copy / "src" / "profilectl" / relative
                original = target.read_text()
                if original.count(old) != 1:
                    print(f"STALE    formula {relative}: {what} (the text is not there once: update FORMULAS)")
                    survivors.append(f"stale: {what}")
                    continue
                target.write_text(original.replace(old, new))
                try:
                    killed, by = run_tests({"PYTHONPATH": str(copy / "src")}, copy)
                finally:
                    target.write_text(original)
                total += 1
                print(f"{'killed  ' if killed else 'SURVIVED'} formula {relative}: {what}: {by}", flush=True)
                if not killed:
                    survivors.append(f"formula {relative}: {what}")
    print(f"{total - len(survivors)} of {total} mutants killed in {time.monotonic() - started:.0f} s; survivors: "
          + ("; ".join(survivors) or "none"))
    return 0 if not survivors else 1


if __name__ == "__main__":
    sys.exit(main())
