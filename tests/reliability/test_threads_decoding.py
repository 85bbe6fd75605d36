"""Nodes' partials decoded in threads: `report --on-cluster` reads each node's answer in a thread of
its own, and msgspec builds a dataclass's type information at its first use; two threads doing that
at once crashed the process (SIGSEGV in msgspec's extension, 24 of 60 fresh processes with eight
threads before the decoders were made once under a lock; CI saw it once as an --on-cluster report
dying with no output). Each round is a fresh interpreter: the first use is what races."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from support import REPO

pytest.importorskip("msgspec")

RACE = textwrap.dedent("""\
    import sys, threading
    sys.path.insert(0, sys.argv[2])
    from profilectl.read import partials
    data = open(sys.argv[1], "rb").read()
    start = threading.Barrier(8)
    decoded = []
    def read():
        start.wait()
        decoded.append(partials.decode(data, "a node's partial"))
    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(decoded) == 8 and all(d == decoded[0] for d in decoded)
""")


def one_partial(root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The partial.json a rank of a real two-rank job leaves (torch traces of tests/fixtures/diagnosis/straggler)."""
    from profilectl.read import partials
    from profilectl.read.load import load_job
    monkeypatch.setenv("PROFILECTL_CACHE_DIR", str(root / "cache"))
    job = root / "20261125T100000Z-trace-job42.0"
    for rank, host in {0: "node1", 1: "node2"}.items():
        raw = job / f"{host}-rank{rank}" / "raw"
        raw.mkdir(parents=True)
        (raw.parent / "manifest.json").write_text(json.dumps({
            "schema_version": 1, "profilectl_version": "0", "service": "trace", "backend": "torch", "reason": "",
            "fallbacks": [], "tool": None, "argv": [], "phases": [], "workload": ["python3", "ddp.py"],
            "workload_source": "argv", "counter_set": None, "gpu": None, "started_at": "2026-11-25T10:00:00Z",
            "finished_at": "2026-11-25T10:00:05Z", "wall_seconds": 5.0, "exit_code": 0, "status": "ok"}))
        for f in (REPO / "tests/fixtures/diagnosis/straggler").iterdir():
            if f"rank{rank}-" in f.name or f"rank-{rank}-" in f.name:
                shutil.copy2(f, raw / f.name)
    load_job(job)  # each rank's partial made and kept beside it
    return next(job.rglob(partials.FILE))


def test_eight_threads_decoding_their_first_partials_at_once_never_crash(tmp_path, monkeypatch):
    path = one_partial(tmp_path, monkeypatch)
    script = tmp_path / "race.py"
    script.write_text(RACE)
    crashed = []
    for _ in range(12):  # before the fix 40 % of the rounds crashed: 12 clean rounds by chance is 0.2 %
        done = subprocess.run([sys.executable, str(script), str(path), str(REPO / "src")], capture_output=True,
                              text=True, timeout=120)
        if done.returncode != 0:
            crashed.append((done.returncode, done.stderr[-400:]))
    assert not crashed, crashed
