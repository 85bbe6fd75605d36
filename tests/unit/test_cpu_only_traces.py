"""A CPU-only torch.profiler trace (a gloo job without GPU): operator and annotation tables, and a
note saying why there is no GPU timeline, not "no profiler output recognised"."""

import gzip
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from profilectl.backends import READERS
from profilectl.formats.reader import read_path

# HTA's cpu_only test trace: rank 34 of 300 (gloo), whose distributedInfo lists every process group's
# ranks, so "traceEvents" starts 40 kB into the file
CPU_ONLY = Path(__file__).resolve().parents[1] / "fixtures" / "hta" / "cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"


def by_hand(category):
    with gzip.open(CPU_ONLY, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    sums = defaultdict(lambda: [0, 0])
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == category:
            sums[e["name"]][0] += 1
            sums[e["name"]][1] += round(e["dur"] * 1000)
    return dict(sums)


def test_a_gloo_cpu_only_trace_is_recognised_and_read():
    with gzip.open(CPU_ONLY, "rb") as fh:
        assert fh.read().find(b'"traceEvents"') > 4096  # beyond the first look at a file's head
    tables = read_path(CPU_ONLY, READERS)
    assert not tables.kernels and not tables.timelines
    assert {name: [s.calls, s.total] for name, s in tables.operators.items()} == by_hand("cpu_op")
    # no annotation nests in another here: calls and totals are the raw sums
    assert {row.name: [row.calls, row.total_ns] for row in tables.annotations} == by_hand("user_annotation")
    assert all(row.gpu_ns is None for row in tables.annotations)
    note, = tables.notes
    assert note.startswith("no GPU timeline for ") and "no GPU activity" in note


def test_the_report_of_a_cpu_only_trace_shows_operators_annotations_and_why_no_timeline():
    done = subprocess.run([sys.executable, "-m", "profilectl", "report", str(CPU_ONLY), "--format", "md"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "aten::empty" in out and "gloo:all_reduce" in out and "ProfilerStep#551" in out
    # why there is no GPU timeline, said once, first: the headline (not a note per trace file)
    assert "**Where the time goes:** no GPU activity recorded" in out and "no GPU timeline for" not in out
    assert "GPU launched" not in out


def _torch_python() -> bool:
    return subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _torch_python(), reason="needs Debian's python3-torch at /usr/bin/python3 "
                                                "(tools/install-host-deps --tests installs it as root)")
def test_torch_on_a_gpu_machine_that_records_only_cpu_operators_is_a_cpu_workload_not_a_failure(machine, tmp_path):
    """Seen on 2 H200s: gloo collectives on CPU tensors under `trace` were "no-output" (exit 4, "torchrun
    started the ranks outside the profiler"), though the trace held every rank's operators. A workload
    that never reached the profiler records nothing at all: that one stays a failure."""
    from cli_support import json_run
    machine.python_with_torch("2.5.1", hip=None, cuda="12.4")  # the probe sees torch with CUDA
    cpu = tmp_path / "cpu.py"
    cpu.write_text("import torch\nfor _ in range(3):\n    torch.ones(64, 64) @ torch.ones(64, 64)\n")
    result, run = json_run(machine, "trace", "--backend", "torch", "--no-sample", "--", "/usr/bin/python3", str(cpu))
    assert (result["status"], result["exit_code"]) == ("ok", 0), result["message"]
    nothing = tmp_path / "nothing.py"
    nothing.write_text("print('no torch here')\n")
    result, _ = json_run(machine, "trace", "--backend", "torch", "--no-sample", "--", "/usr/bin/python3", str(nothing))
    assert (result["status"], result["exit_code"]) == ("no-output", 4)
