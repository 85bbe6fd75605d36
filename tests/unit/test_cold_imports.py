"""`report` of a plain folder of profiler files starts without the modules that only a stored run, a
SLURM job, counters or power need (issue 38's cold start: the manifest chain, the env report and
facts, the counter sets, the telemetry), and a stored summary holding those types still decodes in a
process that never imported them (read/summary.py imports them before the first decode). Each case
runs in a fresh interpreter: what one test imported would hide what another leaves out."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CSV = REPO / "tests/fixtures/rocprofv3-docs/kernel_trace.csv"

# modules a report of a folder of CSV files never needs: a run's manifest and env report (and the
# facts and counter sets they name), the telemetry's power model, the roofline's tool facts
NOT_FOR_A_FOLDER = ("profilectl.manifest", "profilectl.envreport", "profilectl.facts", "profilectl.countersets",
                    "profilectl.telemetry.model", "profilectl.formats.rocprof_compute")

REPORT_AND_LIST_MODULES = """
import json, os, sys
from profilectl.cli import main
sys.argv = ["profilectl", "report", sys.argv[1], "--format", "json"]
code = main()
with open(os.environ["MODULES_OUT"], "w") as out:
    json.dump({"code": code, "modules": sorted(m for m in sys.modules if m.startswith("profilectl"))}, out)
"""


def _fresh(code: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO / "src"), **(env or {})})


def test_a_report_of_a_csv_folder_imports_none_of_a_runs_or_jobs_modules(tmp_path):
    folder = tmp_path / "host"
    folder.mkdir()
    shutil.copy(CSV, folder / "1_kernel_trace.csv")
    modules = tmp_path / "modules.json"
    done = _fresh(REPORT_AND_LIST_MODULES, str(folder),
                  env={"MODULES_OUT": str(modules), "PROFILECTL_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["totals"]["dispatches"] > 0 and report["kernels"]  # the report itself is whole
    loaded = set(json.loads(modules.read_text())["modules"])
    assert "profilectl.read.summary" in loaded and "profilectl.jobs" in loaded  # (the probe saw the reading)
    assert not loaded & set(NOT_FOR_A_FOLDER), sorted(loaded & set(NOT_FOR_A_FOLDER))


def _stored_summary() -> bytes:
    """A summary of a SLURM job's run with a fallback and power: the types a CSV's report never builds."""
    from profilectl.envreport import Fallback
    from profilectl.jobs import JobManifest, JobRank
    from profilectl.read.summary import RunStory, SourceInfo, Summary
    from profilectl.telemetry.model import PowerSummary
    run = RunStory(service="trace", backend="torch", reason="the only one", status="ok", message=None, exit_code=0,
                   started_at="2026-11-28T05:00:00Z", wall_seconds=3.5, workload=("python3", "train.py"), notes=(),
                   fallbacks=(Fallback(backend="ncu", reason="not installed", fix="install Nsight Compute"),))
    power = PowerSummary(source="nvml", samples=4, interval_s=0.1, duration_s=0.3, avg_power_w=300.0,
                         peak_power_w=410.0, energy_j=90.0, energy_method="counter", trapezoid_energy_j=89.5,
                         peak_memory_bytes=2 << 30)
    job = JobManifest(schema_version=1, job_id="42", step_id="0", service="trace", ntasks=2, nodes=("n1", "n2"),
                      ranks=(JobRank(rank=0, host="n1", status="ok", run="n1-rank0"),
                             JobRank(rank=1, host="n2", status="lost", run="n2-rank1")),
                      status="failed", message="rank 1 lost")
    return Summary(source=SourceInfo(kind="profilectl-job", path="/traces/job42.0"), run=run, power=power,
                   job=job).encode()


DECODE_AND_DESCRIBE = """
import json, sys
from profilectl.read.summary import Summary
data = sys.stdin.buffer.read()
fast = Summary.decode(data, "stdin")  # msgspec
general = Summary.from_dict(json.loads(data), "stdin")  # dacite, the path that names what is wrong
print(json.dumps({"same": fast == general, "fallback": type(fast.run.fallbacks[0]).__name__,
                  "job": type(fast.job).__name__, "rank": type(fast.job.ranks[1]).__name__,
                  "lost": fast.job.ranks[1].status, "power": type(fast.power).__name__,
                  "peak_w": fast.power.peak_power_w}))
"""


def test_a_stored_summary_with_a_job_power_and_fallbacks_decodes_where_none_was_imported():
    done = subprocess.run([sys.executable, "-c", DECODE_AND_DESCRIBE], input=_stored_summary(), capture_output=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout) == {"same": True, "fallback": "Fallback", "job": "JobManifest", "rank": "JobRank",
                                       "lost": "lost", "power": "PowerSummary", "peak_w": 410.0}


RESOLVE_EVERY_FIELD = """
import dataclasses, json, typing
from profilectl.read.summary import Summary
Summary.decode(b'{"source": {"kind": "files", "path": "."}}', "a minimal summary")  # the first decode
seen, todo = set(), [Summary]
while todo:
    cls = todo.pop()
    if cls in seen:
        continue
    seen.add(cls)
    for hint in typing.get_type_hints(cls).values():  # NameError where a field's type is not in reach
        stack = [hint]
        while stack:
            t = stack.pop()
            stack.extend(typing.get_args(t))
            if dataclasses.is_dataclass(t):
                todo.append(t)
print(json.dumps(sorted(c.__name__ for c in seen)))
"""


def test_every_field_type_of_a_summary_resolves_after_its_first_decode():
    """Every dataclass a summary can hold (the roofline's and the collectives' too), its annotations
    resolved by name as msgspec and dacite resolve them, in a fresh interpreter."""
    done = _fresh(RESOLVE_EVERY_FIELD)
    assert done.returncode == 0, done.stderr
    reached = set(json.loads(done.stdout))
    assert {"RooflineResult", "CollectiveCalls", "JobManifest", "PowerSummary", "Fallback", "Diagnosis"} <= reached

