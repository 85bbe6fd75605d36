"""Full disks: the traces folder on a real, small file system (tmpfs) that fills up while the
workload writes its output, before the run starts, or while the tables are written. Every run ends
with a final manifest (status `disk-full`, exit 5), the logs keep what fit, no table is left
looking complete beside a missing one, and the one-line error names the folder and its free space."""

import json
import os
import stat
import time

import pytest
from reliability_support import manifest_of, needs_tmpfs, one_line, only_run

FILLER = """
import os, sys
folder, keep = sys.argv[1], int(sys.argv[2])
st = os.statvfs(folder)
with open(os.path.join(folder, "filler.bin"), "wb") as fh:
    fh.write(bytes(max(0, st.f_bavail * st.f_frsize - keep)))
print("filled, keeping", keep)
"""


def no_temp_files(run_dir):
    return [p.name for p in run_dir.rglob(".*.tmp")] == []


@needs_tmpfs
def test_filling_while_the_workload_writes_output_neither_hangs_nor_loses_the_run(harness, small_fs):
    traces = harness.traces(small_fs(1024) / "traces")
    noisy = "import sys\nfor i in range(3000): sys.stdout.write('%05d ' % i + 'x' * 994 + '\\n')\nprint('the end')"
    started = time.monotonic()
    done = harness.run("profile", "--repeat", "2", "--warmup", "0", "--traces-dir", str(traces), "--",
                       "python3", "-c", noisy, timeout=60)
    assert time.monotonic() - started < 30  # the workload never blocks on a full pipe
    assert done.returncode == 5, done.stderr
    line = one_line(done.stderr)
    assert "disk-full" in line and str(traces) in line and "free of 1.0 MiB" in line, line
    run = only_run(traces)
    manifest = manifest_of(run)
    assert manifest["status"] == "disk-full" and manifest["exit_code"] == 5
    assert manifest["finished_at"] and "stdout.log" in manifest["message"]
    assert [s["exit_code"] for s in manifest["steps"]] == [0, None]  # no second run on a full disk
    kept = (run / "stdout.log").read_text()
    assert len(kept) > 100_000 and kept.startswith("00000 ")  # what fit is kept, in order
    assert no_temp_files(run)


@needs_tmpfs
def test_an_already_full_disk_is_one_line_and_leaves_no_empty_run(harness, small_fs):
    mount = small_fs(256)
    traces = harness.traces(mount / "traces")
    traces.mkdir()
    (mount / "filler.bin").write_bytes(bytes(os.statvfs(mount).f_bavail * os.statvfs(mount).f_frsize))
    done = harness.run("profile", "--repeat", "1", "--warmup", "0", "--traces-dir", str(traces), "--", "true")
    assert done.returncode == 5, done.stderr
    line = one_line(done.stderr)
    assert str(traces) in line and "0 B free of 256.0 KiB" in line and "nothing was run" in line, line
    assert "Traceback" not in done.stderr
    assert list(traces.iterdir()) == []


@needs_tmpfs
def test_filling_while_the_tables_are_written_keeps_all_or_none(harness, small_fs, tmp_path):
    """The workload fills the file system but leaves `keep` bytes: for small `keep` the records or
    the tables no longer fit. Every run still ends final, and its tables are all there or none."""
    filler = tmp_path / "filler.py"
    filler.write_text(FILLER)
    endings = {}
    for pages in range(1, 9):
        mount = small_fs(1024)
        traces = harness.traces(mount / "traces")
        done = harness.run("profile", "--repeat", "1", "--warmup", "0", "--traces-dir", str(traces), "--",
                           "python3", str(filler), str(mount), str(pages * 4096))
        run = only_run(traces)
        manifest = manifest_of(run)
        assert manifest["status"] in ("ok", "disk-full") and done.returncode in (0, 5), done.stderr
        tables = sorted(p.name for p in run.glob("*.csv"))
        if (run / "summary.json").exists():
            json.loads((run / "summary.json").read_text())
            assert tables == ["timing.csv"], tables
        else:
            assert tables == [], tables  # none left looking complete
            assert manifest["status"] == "disk-full"
        assert no_temp_files(run)
        listed = {p["path"] for p in manifest["outputs"]}
        assert listed == {str(p.relative_to(run)) for p in run.rglob("*") if p.is_file() and
                          not p.name.startswith(".")}
        endings[pages] = manifest["message"]
    assert any("the tables and summary" in message for message in endings.values()), endings
    assert any(message == "ok" for message in endings.values()), endings


@pytest.mark.parametrize("mask", [0o077, 0o027])
def test_run_files_honour_the_umask(harness, tmp_path, mask):
    traces = harness.traces()
    old = os.umask(mask)
    try:
        done = harness.run("profile", "--repeat", "1", "--warmup", "0", "--traces-dir", str(traces), "--", "true")
    finally:
        os.umask(old)
    assert done.returncode == 0, done.stderr
    run = only_run(traces)
    for path in [run, *run.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & mask == 0, (path, oct(mode))
