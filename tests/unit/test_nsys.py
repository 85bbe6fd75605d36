"""Nsight Systems: the reader on real SQLite exports from public repositories (kernel totals checked
against SQL written here and against the numbers tests/fixtures/README.md states from a manual
check), `.nsys-rep` through `nsys export`, and the backend's argv, ranks and capture ranges proven by
the nsys double (tests/doubles/nsys) with real processes and real launchers."""

import json
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

from cli_support import cli, json_run
from support import REPO

NSYS = REPO / "tests/fixtures/nsys"
VECTORADD = NSYS / "vectoradd-streams-2022.4.sqlite"  # Nsight Systems 2022.4.2.1, export schema 3.0.0
API_ONLY = NSYS / "gemm-api-only-2025.1.sqlite"  # Nsight Systems 2025.1.3.140, export schema 3.17.2
H100 = "0, NVIDIA H100 80GB HBM3, 81559, 9.0"
PROGRAM = ["/bin/echo", "a CUDA program"]  # not Python: torch.profiler cannot run inside it
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]
needs_mpirun = pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs Open MPI's mpirun (openmpi-bin)")
needs_torchrun = pytest.mark.skipif(shutil.which("torchrun") is None, reason="needs torchrun (Debian's python3-torch)")


def report_json(path: Path, env=None) -> dict:
    done = cli_report(path, env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def cli_report(path: Path, env=None):
    import os
    import subprocess
    full = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "report", str(path), "--format", "json"],
                          capture_output=True, text=True, env=full, timeout=120)


def sql_kernel_totals(path: Path) -> dict[str, tuple[int, int]]:
    """Calls and total ns per kernel, straight from the export (independent of the reader)."""
    db = sqlite3.connect(path)
    rows = db.execute("SELECT s.value, count(*), sum(k.\"end\" - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                      "JOIN StringIds s ON s.id = k.demangledName GROUP BY s.value").fetchall()
    db.close()
    return {name: (n, total) for name, n, total in rows}


# ------------------------------------------------------------------ the reader
def test_real_export_kernel_totals_equal_sql_and_the_hand_check(tmp_path):
    summary = report_json(VECTORADD)
    assert summary["source"]["kind"] == "nsys"
    kernels = {k["name"]: (k["calls"], round(k["total_ns"])) for k in summary["kernels"]}
    assert kernels == sql_kernel_totals(VECTORADD)
    # tests/fixtures/README.md: the four vecAdd launches, 22,560 + 29,055 + 33,984 + 31,071 ns
    assert kernels == {"vecAdd(double *, double *, double *, int)": (4, 116_670)}
    copies = {c["name"]: (c["calls"], round(c["total_ns"])) for c in summary["memory_copies"]}
    assert copies == {"Memcpy Host-to-Device": (8, 1_468_968), "Memcpy Device-to-Host": (4, 636_597)}
    api = {a["name"]: a["calls"] for a in summary["api"]}
    assert api["cudaLaunchKernel"] == 4 and api["cudaMemcpyAsync"] == 12  # the _v7000 / _v3020 suffixes gone


def test_the_timeline_has_the_kernels_and_copies_on_their_streams():
    from profilectl.backends import READERS
    from profilectl.formats.reader import read_path
    tables = read_path(VECTORADD, READERS)
    (timeline,) = tables.timelines
    assert len(timeline.start) == 4 + 12 and (timeline.kind == 0).sum() == 4
    assert sorted(timeline.streams) == [f"GPU 0 stream {s}" for s in (13, 14, 15, 16)]
    assert int((timeline.end - timeline.start)[timeline.kind == 0].sum()) == 116_670
    assert len(timeline.api_correlation) == 38  # every CUDA call carries its correlation id
    launched = set(timeline.correlation.tolist())
    assert launched <= set(timeline.api_correlation.tolist())  # each kernel and copy links to its launch


def test_newer_schema_with_the_renamed_metadata_table_and_no_kernels():
    from profilectl.formats import nsys_sqlite
    assert nsys_sqlite.export_version(API_ONLY) == "2025.1.3.140"  # META_DATA_EXPORT (EXPORT_META_DATA in 2022.4)
    assert nsys_sqlite.export_version(VECTORADD) == "2022.4.2.1"
    summary = report_json(API_ONLY)
    assert summary["kernels"] == []
    assert {a["name"] for a in summary["api"]} == {"cuInit", "cuCtxSetCurrent", "cuStreamCreate"}
    assert any("holds no CUDA kernel" in n for n in summary["notes"]), summary["notes"]


def test_nsys_and_rocpd_sqlite_are_told_apart_by_their_tables(tmp_path):
    from profilectl.formats import nsys_sqlite, rocpd
    assert not rocpd.is_rocpd(VECTORADD) and nsys_sqlite.is_nsys_sqlite(VECTORADD)
    other = tmp_path / "rocpd.sqlite"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE rocpd_kernel_dispatch (id INTEGER)")
    db.execute("CREATE TABLE rocpd_string (id INTEGER, guid TEXT, string TEXT)")
    db.commit()
    db.close()
    assert not nsys_sqlite.is_nsys_sqlite(other)


def with_nvtx(tmp_path: Path) -> Path:
    """The real export with NVTX ranges added on the thread of its CUDA calls (the fixture was made
    without -t nvtx): `forward` over every call, `layer` nested inside it over the first two kernel
    launches, a start/end range and ProfilerStep#1 (a step mark)."""
    path = tmp_path / "with-nvtx.sqlite"
    shutil.copyfile(VECTORADD, path)
    db = sqlite3.connect(path)
    tid, first, last = db.execute("SELECT globalTid, min(start), max(\"end\") FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
    launches = db.execute("SELECT r.start, r.\"end\" FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
                          "WHERE s.value LIKE 'cudaLaunchKernel%' ORDER BY r.start").fetchall()
    db.execute("CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, \"end\" INTEGER, eventType INTEGER NOT NULL, "
               "text TEXT, globalTid INTEGER, textId INTEGER, domainId INTEGER)")
    rows = [(first - 10, last + 10, 59, "forward", tid), (launches[0][0] - 1, launches[1][1] + 1, 59, "layer", tid),
            (first - 10, last + 10, 60, "io", tid), (first - 5, first - 1, 59, "ProfilerStep#1", tid),
            (first - 4, None, 59, "never ended", tid)]
    db.executemany("INSERT INTO NVTX_EVENTS (start, \"end\", eventType, text, globalTid) VALUES (?, ?, ?, ?, ?)", rows)
    db.commit()
    db.close()
    return path


def test_nvtx_ranges_are_the_annotations_table_with_self_and_gpu_time(tmp_path):
    from profilectl.backends import READERS
    from profilectl.formats.reader import read_path
    path = with_nvtx(tmp_path)
    db = sqlite3.connect(path)
    (all_gpu,) = db.execute("SELECT (SELECT sum(\"end\" - start) FROM CUPTI_ACTIVITY_KIND_KERNEL) + "
                            "(SELECT sum(\"end\" - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY)").fetchone()
    (first_two,) = db.execute("SELECT sum(d) FROM (SELECT k.\"end\" - k.start AS d FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                              "ORDER BY k.start LIMIT 2)").fetchone()
    rows = {n: (s, e) for s, e, n in db.execute("SELECT start, \"end\", text FROM NVTX_EVENTS WHERE \"end\" IS NOT NULL")}
    db.close()
    tables = read_path(path, READERS)
    got = {a.name: a for a in tables.annotations}
    assert set(got) == {"forward", "layer", "io", "ProfilerStep#1"}  # the range that never ended is left out
    forward, layer = got["forward"], got["layer"]
    assert forward.total_ns == rows["forward"][1] - rows["forward"][0]
    step = got["ProfilerStep#1"]
    assert forward.self_ns == forward.total_ns - layer.total_ns - step.total_ns  # both nest inside it on its thread
    assert layer.self_ns == layer.total_ns and got["io"].self_ns == got["io"].total_ns  # start/end: never nested
    assert forward.gpu_ns == all_gpu and layer.gpu_ns == first_two
    assert [m.name for m in tables.timelines[0].markers] == ["ProfilerStep#1"]


# ------------------------------------------------------------------ .nsys-rep
def test_a_report_without_nsys_is_one_line_exit_3_naming_what_to_do(tmp_path):
    report = tmp_path / "profile.nsys-rep"
    shutil.copyfile(VECTORADD, report)
    done = cli_report(report, {"PATH": "/usr/bin:/bin"})
    assert done.returncode == 3, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "nsys export --type sqlite" in done.stderr and "not on PATH" in done.stderr


def test_a_report_is_read_through_nsys_export_into_a_scratch_folder(machine, tmp_path, monkeypatch):
    machine.double("nsys")
    report = tmp_path / "user" / "host1-rank3-77.nsys-rep"
    report.parent.mkdir()
    shutil.copyfile(VECTORADD, report)
    log = tmp_path / "nsys.log"
    summary = report_json(report.parent, {"PATH": machine.path_with_bin(), "FAKE_NSYS_LOG": str(log)})
    assert {k["name"]: k["calls"] for k in summary["kernels"]} == {"vecAdd(double *, double *, double *, int)": 4}
    (call,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert call["argv"][:6] == ["export", "--type", "sqlite", "--force-overwrite", "true", "--output"]
    assert call["argv"][-1] == str(report)
    assert sorted(p.name for p in report.parent.iterdir()) == [report.name]  # nothing written beside it
    from profilectl.backends import READERS
    from profilectl.formats.reader import read_path
    monkeypatch.setenv("PATH", machine.path_with_bin())
    assert [(r.rank, r.host) for r in read_path(report, READERS).ranks] == [("3", "host1")]  # from the report's name
    failing = cli_report(report, {"PATH": machine.path_with_bin(), "FAKE_NSYS_EXPORT_FAIL": "1"})
    assert failing.returncode == 2 and "nsys export --type sqlite failed: Failed to open the report" in failing.stderr


# ------------------------------------------------------------------ choosing nsys, and saying why not
def nvidia(machine, nsys=True):
    machine.nvidia(H100)
    if nsys:
        machine.double("nsys")
    return machine


def dry_plan(machine, *args):
    done = cli(machine, "trace", "--dry-run", "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_env_check_and_the_plan_pick_nsys_for_a_non_python_program(machine):
    nvidia(machine)
    report = json.loads(json.dumps(machine.probe().to_dict(), default=str))  # what env-check --json prints
    assert report["tools"]["nsys"]["version"].startswith("2024.5.1.113")
    program = report["capabilities"]["program_tracing"]
    assert program["available"] and program["backend"] == "nsys", program
    plan = dry_plan(machine, "--", *PROGRAM)
    assert plan["backend"] == "nsys"
    (main, export) = plan["phases"][0]["steps"]
    argv = main["argv"]
    assert Path(argv[0]).name == "nsys" and argv[1] == "profile" and argv[-2:] == PROGRAM
    assert "--trace=cuda,nvtx" in argv  # CUDA API, kernels, copies; NVTX ranges (preset lightweight)
    assert [a for a in argv if a.startswith("--output=")] == [f"--output={plan['run_dir']}/raw/%p_nsys"]
    assert export["argv"][-7:] == [argv[0], "export", "--type", "sqlite", "--force-overwrite", "true", "--output"]


def test_without_nsys_the_plan_and_env_check_say_why_not(machine):
    nvidia(machine, nsys=False)
    report = json.loads(json.dumps(machine.probe().to_dict(), default=str))
    program = report["capabilities"]["program_tracing"]
    assert not program["available"]
    assert program["reason"] == ("trace of a non-Python program on NVIDIA needs Nsight Systems (nsys), not found on "
                                 "PATH; falling back to timing")
    plan = dry_plan(machine, "--", *PROGRAM)
    assert plan["backend"] == "timing"
    assert any(n.startswith("trace of a non-Python program on NVIDIA needs Nsight Systems (nsys), not found on PATH")
               for n in plan["notes"]), plan["notes"]
    done = cli(machine, "trace", "--backend", "nsys", "--dry-run", "--", *PROGRAM)
    assert done.returncode == 3 and "Nsight Systems (nsys) not found on PATH" in done.stderr


def test_ranges_and_steps_become_nvtx_capture_ranges(machine):
    nvidia(machine)
    plan = dry_plan(machine, "--range", "forward", "--", *PROGRAM)
    argv, env = plan["phases"][0]["steps"][0]["argv"], plan["phases"][0]["environment"]
    assert argv[argv.index("--capture-range=nvtx"):][:3] == ["--capture-range=nvtx", "--nvtx-capture=forward",
                                                              "--capture-range-end=stop"]
    assert env["NSYS_NVTX_PROFILER_REGISTER_ONLY"] == "0"  # torch.cuda.nvtx and most code push unregistered names
    plan = dry_plan(machine, "--backend", "nsys", "--steps", "3:5", "--", sys.executable, "train.py")
    argv, env = plan["phases"][0]["steps"][0]["argv"], plan["phases"][0]["environment"]
    assert "--nvtx-capture=profilectl.steps" in argv
    assert env["PROFILECTL_STEP_ACTION"] == "nvtx" and env["PROFILECTL_STEPS"] == "3:5"
    assert env["PROFILECTL_NVTX_STEPS"] == "profilectl.steps"
    for args, words in ((["--steps", "3:5"], "steps are PyTorch training steps"),
                        (["--kernel", "gemm"], "Nsight Systems cannot honour --kernel"),
                        (["--steps", "1:2", "--range", "x"], "both choose the one capture range")):
        done = cli(machine, "trace", "--dry-run", *args, "--", *PROGRAM)
        assert done.returncode == 2 and words in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


def test_each_launcher_gets_one_report_per_rank_named_by_its_rank_variable(machine, tmp_path):
    nvidia(machine)
    machine.tool("srun")
    script = tmp_path / "train.py"
    script.write_text("print('rank')\n")
    plan = dry_plan(machine, "--", "srun", "-n", "2", *PROGRAM)
    argv = plan["phases"][0]["steps"][0]["argv"]
    assert argv[:3] == ["srun", "-n", "2"] and Path(argv[3]).name == "nsys"  # srun ... nsys profile ... program
    assert f"--output={plan['run_dir']}/raw/%h-rank%q{{SLURM_PROCID}}-%p" in argv
    plan = dry_plan(machine, "--", *MPIRUN, *PROGRAM)
    argv = plan["phases"][0]["steps"][0]["argv"]
    assert f"--output={plan['run_dir']}/raw/%h-rank%q{{OMPI_COMM_WORLD_RANK}}%q{{PMI_RANK}}-%p" in argv
    plan = dry_plan(machine, "--backend", "nsys", "--", "torchrun", "--nproc_per_node", "2", str(script))
    argv = plan["phases"][0]["steps"][0]["argv"]
    at = next(i for i, a in enumerate(argv) if Path(a).name == "nsys")
    assert argv[:at] == ["torchrun", "--nproc_per_node", "2", "--no_python"]  # torch 1.13 knows only this spelling
    assert f"--output={plan['run_dir']}/raw/%h-rank%q{{RANK}}-%p" in argv
    assert Path(argv[-2]).name.startswith("python") and argv[-1] == str(script)


# ------------------------------------------------------------------ real runs through the double
def run_env(tmp_path):
    return {"FAKE_NSYS_REPORT": str(VECTORADD), "FAKE_NSYS_LOG": str(tmp_path / "nsys.log")}


def logged(tmp_path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "nsys.log").read_text().splitlines()]


def test_a_plain_program_is_traced_exported_and_read(machine, tmp_path):
    nvidia(machine)
    result, run = json_run(machine, "trace", "--range", "forward", "--", *PROGRAM, extra_env=run_env(tmp_path))
    assert result["status"] == "ok", result["message"]
    reports = sorted(p.name for p in (run / "raw").iterdir())
    (rep,) = [n for n in reports if n.endswith(".nsys-rep")]
    assert rep.endswith("_nsys.nsys-rep") and rep.replace(".nsys-rep", ".sqlite") in reports  # exported after the run
    profile, export = logged(tmp_path)
    assert profile["argv"][0] == "profile" and "--nvtx-capture=forward" in profile["argv"]
    assert profile["env"]["NSYS_NVTX_PROFILER_REGISTER_ONLY"] == "0"
    assert export["argv"][:3] == ["export", "--type", "sqlite"]
    summary = result["summary"]
    assert {k["name"]: k["calls"] for k in summary["kernels"]} == {"vecAdd(double *, double *, double *, int)": 4}
    annotations = {a["name"]: a for a in summary.get("annotations") or []}
    assert "forward" in annotations, summary.keys()  # the captured range, as nsys records it with -t nvtx


@needs_mpirun
def test_mpirun_ranks_each_write_their_own_report(machine, tmp_path):
    nvidia(machine)
    result, run = json_run(machine, "trace", "--", *MPIRUN, *PROGRAM, extra_env=run_env(tmp_path), timeout=300)
    assert result["status"] == "ok", result["message"]
    names = sorted(p.name for p in (run / "raw").glob("*.nsys-rep"))
    assert [n.split("-rank")[1].split("-")[0] for n in names] == ["0", "1"], names
    ranks = sorted(call["env"].get("OMPI_COMM_WORLD_RANK") for call in logged(tmp_path) if call["argv"][0] == "profile")
    assert ranks == ["0", "1"]
    assert sorted(r["rank"] for r in result["summary"]["ranks"]) == ["0", "1"]


@needs_torchrun
def test_torchrun_workers_each_run_nsys(machine, tmp_path):
    import socket
    nvidia(machine)
    script = tmp_path / "train.py"
    script.write_text("import os\nprint('worker', os.environ['RANK'])\n")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    torchrun = ["torchrun", "--nproc_per_node=2", "--nnodes=1", "--rdzv_backend=c10d",
                f"--rdzv_endpoint=127.0.0.1:{port}", "--redirects", "1", "--tee", "1"]
    result, run = json_run(machine, "trace", "--backend", "nsys", "--", *torchrun, str(script),
                           extra_env=run_env(tmp_path), timeout=300)
    assert result["status"] == "ok", result["message"]
    calls = [c for c in logged(tmp_path) if c["argv"][0] == "profile"]
    assert sorted(c["env"]["RANK"] for c in calls) == ["0", "1"]
    assert all(c["argv"][-1] == str(script) for c in calls)
    names = sorted(p.name for p in (run / "raw").glob("*.nsys-rep"))
    assert [n.split("-rank")[1].split("-")[0] for n in names] == ["0", "1"], names


STEPPING = """import json, sys, torch
calls, done = [], [0]
torch.cuda.nvtx.range_push = lambda name: calls.append(["push", name, done[0]])  # record what the hook marks
torch.cuda.nvtx.range_pop = lambda: calls.append(["pop", done[0]])
model = torch.nn.Linear(4, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(6):
    model(torch.randn(2, 4)).sum().backward()
    optimizer.step()
    done[0] += 1
json.dump(calls, open(sys.argv[1], "w"))
"""


@needs_torchrun  # Debian's python3-torch (torchrun comes with it)
def test_steps_open_the_nvtx_range_the_capture_waits_for_over_exactly_those_steps(machine, tmp_path):
    nvidia(machine)
    script, marks = tmp_path / "stepping.py", tmp_path / "marks.json"
    script.write_text(STEPPING)
    result, _ = json_run(machine, "trace", "--backend", "nsys", "--steps", "2:4", "--", "/usr/bin/python3", str(script),
                         str(marks), extra_env=run_env(tmp_path), timeout=300)
    assert result["status"] == "ok", result["message"]
    (profile, _export) = logged(tmp_path)
    assert "--nvtx-capture=profilectl.steps" in profile["argv"] and profile["env"]["PROFILECTL_STEP_ACTION"] == "nvtx"
    # steps 2 and 3 (0-based): the range opens when step 1 has ended and closes when step 3 has
    assert json.loads(marks.read_text()) == [["push", "profilectl.steps", 1], ["pop", 3]]


def test_a_report_of_several_processes_gives_one_rank_row_and_timeline_each(tmp_path):
    """nsys follows the children of what it starts (a launcher wrapped whole, a program that forks):
    each process is its own rank, named by its pid."""
    from profilectl.backends import READERS
    from profilectl.formats.reader import read_path
    path = tmp_path / "two-processes.sqlite"
    shutil.copyfile(VECTORADD, path)
    db = sqlite3.connect(path)
    other = (1 << 48) + (4242 << 24)  # the serialized globalPid of pid 4242 (VM id 1, as in the fixture)
    db.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET globalPid = ? WHERE correlationId IN (125, 126)", (other,))
    db.commit()
    db.close()
    tables = read_path(path, READERS)
    rows = {r.rank: (r.dispatches, round(r.total_ns)) for r in tables.ranks}
    assert rows == {"pid 200206": (2, 22_560 + 29_055), "pid 4242": (2, 33_984 + 31_071)}
    assert sorted(t.rank for t in tables.timelines) == ["pid 200206", "pid 4242"]
    assert tables.kernels["vecAdd(double *, double *, double *, int)"].calls == 4  # the table of the whole run


def test_python_m_torch_distributed_run_with_a_module_runs_python_m_in_each_worker(machine):
    nvidia(machine)
    plan = dry_plan(machine, "--backend", "nsys", "--", sys.executable, "-m", "torch.distributed.run",
                    "--nproc_per_node", "2", "-m", "trainer.main", "--lr", "0.1")
    argv = plan["phases"][0]["steps"][0]["argv"]
    at = next(i for i, a in enumerate(argv) if Path(a).name == "nsys")
    assert argv[:at] == [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--no_python"]
    assert argv[-5:-3] == [sys.executable, "-m"] and argv[-3:] == ["trainer.main", "--lr", "0.1"]


# ---------------------------------------------------------------- what an export holds, as it holds it
def _without_cuda(tmp_path: Path) -> Path:
    """The real 2022.4 export with every CUPTI table dropped: what `nsys profile -t osrt` leaves of
    that program (its OS runtime calls, OSRT_API, are the real rows nsys wrote)."""
    path = tmp_path / "osrt-only.sqlite"
    shutil.copyfile(VECTORADD, path)
    db = sqlite3.connect(path)
    for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'CUPTI_%'").fetchall():
        db.execute(f"DROP TABLE {table}")
    db.commit()
    db.close()
    return path


def test_an_export_of_os_runtime_calls_only_is_read_for_what_it_holds(tmp_path):
    path = _without_cuda(tmp_path)
    db = sqlite3.connect(path)
    expected = {name: [n, total] for name, n, total in db.execute(
        'SELECT s.value, count(*), sum(o."end" - o.start) FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId '
        "GROUP BY s.value")}
    db.close()
    report = report_json(path)  # before: "no records in it ... (header only, or an empty trace?)", exit 2
    assert {row["name"]: [row["calls"], row["total_ns"]] for row in report["api"]} == expected
    assert any("its API table is the OS runtime calls" in note for note in report["notes"])
    assert any("no CUDA kernel" in note for note in report["notes"])


def test_the_os_runtime_calls_are_host_activity_beside_the_cuda_calls():
    from profilectl.model.timeline import HOST_OPERATOR, HOST_RUNTIME
    from profilectl.formats.nsys_sqlite import read_export
    db = sqlite3.connect(VECTORADD)
    (osrt,) = db.execute("SELECT count(*) FROM OSRT_API").fetchone()
    (cuda,) = db.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
    db.close()
    timeline, = read_export(VECTORADD).timelines
    host = timeline.host_activity
    assert int((host.category == HOST_OPERATOR).sum()) == osrt and int((host.category == HOST_RUNTIME).sum()) == cuda
    assert "cudaLaunchKernel" in host.names  # as `nsys stats` names it, without _v7000
    assert {row["name"] for row in report_json(VECTORADD)["api"]} >= {"cudaLaunchKernel", "cudaMemcpyAsync"}


def test_an_nvtx_range_is_a_report_range(tmp_path):
    path = with_nvtx(tmp_path)
    db = sqlite3.connect(path)
    start, end = db.execute("SELECT start, \"end\" FROM NVTX_EVENTS WHERE text = 'layer'").fetchone()
    (inside,) = db.execute(  # kernels whose launch call starts inside the range
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
        "ON r.correlationId = k.correlationId WHERE r.start >= ? AND r.start <= ?", (start, end)).fetchone()
    db.close()
    import subprocess
    done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "report", str(path), "--range", "layer",
                           "--format", "json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr  # before: "no range named 'layer' in these traces"
    assert json.loads(done.stdout)["totals"]["dispatches"] == inside == 2


def test_rows_out_of_time_order_read_as_in_order(tmp_path):
    """Nsight Systems 2025.6 notes that exported rows may come in any order: the same export with
    every activity, API and NVTX table rewritten in reverse time order gives the same report."""
    for side in ("a", "b"):
        (tmp_path / side / "node").mkdir(parents=True)
    ordered = with_nvtx(tmp_path / "a" / "node")
    reversed_ = tmp_path / "b" / "node" / ordered.name  # the same names: the same rank and host
    shutil.copyfile(ordered, reversed_)
    db = sqlite3.connect(reversed_)
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_RUNTIME",
                  "NVTX_EVENTS", "OSRT_API"):
        db.execute(f"CREATE TABLE tmp AS SELECT * FROM {table} ORDER BY start DESC")
        db.execute(f"DELETE FROM {table}")
        db.execute(f"INSERT INTO {table} SELECT * FROM tmp")
        db.execute("DROP TABLE tmp")
    db.commit()
    db.close()
    from profilectl.formats.nsys_sqlite import read_export
    a, b = read_export(ordered), read_export(reversed_)
    assert b.timelines[0].start.tolist() == sorted(b.timelines[0].start.tolist())
    assert b.timelines[0].host_activity.start.tolist() == a.timelines[0].host_activity.start.tolist()
    assert [m.start for m in b.timelines[0].markers] == [m.start for m in a.timelines[0].markers]
    first, second = report_json(ordered), report_json(reversed_)
    for key in ("kernels", "api", "annotations", "diagnosis"):
        assert first[key] == second[key], key
    assert first["timeline"]["ranks"] == second["timeline"]["ranks"]
