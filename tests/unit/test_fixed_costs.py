"""The caches behind env-check's and report's fixed costs answer as the uncached code does, and
never after what they were made of changed: a tool upgraded, torch installed, other facts, a run's
files changed, a run still running."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from support import REPO, read_terminal
from profilectl.probe import sources
from profilectl.probe.machine import Machine

TRACE = REPO / "tests" / "fixtures" / "nvidia-h200" / "torch_profiler_trace.json"


def _counting_tool(folder: Path, name: str, version: str) -> Path:
    """A tool whose --version prints `version` and counts its starts in NAME.starts."""
    path = folder / name
    starts = folder / f"{name}.starts"
    path.write_text(f"#!/bin/sh\necho x >> {starts}\necho '{name} version {version}'\n")
    path.chmod(0o755)
    return starts


def _starts(starts: Path) -> int:
    return len(starts.read_text().splitlines()) if starts.exists() else 0


def test_tool_version_is_asked_once_then_again_after_an_upgrade(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    starts = _counting_tool(bin_dir, "nsys", "2024.5.1")
    machine = Machine(root=tmp_path, path=str(bin_dir), remember=True)
    assert sources.tools(machine, None)["nsys"].version == "2024.5.1"
    assert sources.tools(machine, None)["nsys"].version == "2024.5.1"
    assert _starts(starts) == 1  # the second probe read the kept answer
    replacement = bin_dir / "nsys.new"  # an upgrade: a new file put in place, as package managers do
    replacement.write_text(f"#!/bin/sh\necho x >> {starts}\necho 'nsys version 2025.1.3'\n")
    replacement.chmod(0o755)
    os.replace(replacement, bin_dir / "nsys")
    assert sources.tools(machine, None)["nsys"].version == "2025.1.3"
    assert _starts(starts) == 2


def test_a_tool_that_failed_or_timed_out_is_asked_again(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    slow = bin_dir / "nsys"
    slow.write_text(f"#!/bin/sh\necho x >> {bin_dir / 'starts'}\nexec /bin/sleep 5\n")
    slow.chmod(0o755)
    machine = Machine(root=tmp_path, path=str(bin_dir), timeout_s=0.3, remember=True)
    assert sources.tools(machine, None)["nsys"].version is None
    assert sources.tools(machine, None)["nsys"].version is None
    assert _starts(bin_dir / "starts") == 2
    failing = bin_dir / "ncu"
    failing.write_text(f"#!/bin/sh\necho x >> {bin_dir / 'ncu.starts'}\necho 'ncu version 2025.1 (broken)'\nexit 1\n")
    failing.chmod(0o755)
    sources.tools(machine, None)
    sources.tools(machine, None)
    assert _starts(bin_dir / "ncu.starts") == 2


def test_torch_answer_is_kept_until_torch_is_installed(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    # An interpreter that sees no torch whatever the host has (Debian's python3-torch is system-wide):
    # a fresh venv without system site packages.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    bin_dir = tmp_path / "venv" / "bin"
    env = {"PATH": str(bin_dir), "PYTHONPATH": str(site), "PYTHONNOUSERSITE": "1"}
    machine = Machine(root=Path("/"), path=str(bin_dir), env=env, remember=True)
    assert sources.torch(machine).version is None
    kept = list((tmp_path / "cache" / "probe").glob("torch-*.json"))
    assert len(kept) == 1 and str(site) in json.loads(kept[0].read_text())["witnesses"]
    # a kept answer is served while its witnesses stand (marked here to see it served)
    entry = json.loads(kept[0].read_text())
    entry["answer"]["python"] = "served-from-cache"
    kept[0].write_text(json.dumps(entry))
    assert sources.torch(machine).python == "served-from-cache"
    # torch installed into a folder the interpreter searches: that folder changed, so asked again
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text("")
    (site / "torch" / "version.py").write_text("__version__ = '2.5.1+cu124'\ncuda = '12.4'\nhip = None\n")
    found = sources.torch(machine)
    assert (found.version, found.backend, found.cuda) == ("2.5.1+cu124", "cuda", "12.4")
    # and upgraded in place: version.py is a witness
    (site / "torch" / "version.py").write_text("__version__ = '2.6.0+cu126'\ncuda = '12.6'\nhip = None\n")
    assert sources.torch(machine).version == "2.6.0+cu126"


def test_env_check_json_from_a_kept_assessment_is_the_fresh_one(machine):
    from profilectl.assessment_cache import env_report_dict
    from profilectl.envreport import EnvReport
    from profilectl.plan import assess
    from profilectl.probe import probe
    machine.tool("nvidia-smi", "0, NVIDIA H200, 143771, 9.0\n")
    facts = probe(machine.root, path=str(machine.bin), env=dict(machine.env))
    fresh = json.dumps(EnvReport(facts, assess(facts)).to_dict(), indent=2, default=str)
    assert json.dumps(env_report_dict(facts), indent=2, default=str) == fresh  # computed and kept
    assert json.dumps(env_report_dict(facts), indent=2, default=str) == fresh  # read back
    folder = Path(os.environ["PROFILECTL_CACHE_DIR"]) / "assessments"
    assert len(list(folder.glob("*.json"))) == 1
    # a GPU added: other facts, another key, the planner's answer for them
    machine.tool("nvidia-smi", "0, NVIDIA H200, 143771, 9.0\n1, NVIDIA H200, 143771, 9.0\n")
    more = probe(machine.root, path=str(machine.bin), env=dict(machine.env))
    assert len(more.gpus) == 2
    assert json.dumps(env_report_dict(more), default=str) == json.dumps(EnvReport(more, assess(more)).to_dict(),
                                                                         default=str)
    assert len(list(folder.glob("*.json"))) == 2


def _report(capsys, *argv: str) -> str:
    from profilectl.cli import main
    assert main(["report", *argv]) == 0
    return capsys.readouterr().out


def test_a_bare_folder_report_is_kept_from_its_second_read_and_dropped_when_a_file_changes(tmp_path, capsys):
    folder = tmp_path / "trace"
    folder.mkdir()
    shutil.copy(TRACE, folder / TRACE.name)
    reports = Path(os.environ["PROFILECTL_CACHE_DIR"]) / "reports"
    first = json.loads(_report(capsys, str(folder), "--format", "json"))
    assert first["cache_hit"] is False and not reports.exists()  # "not cached" is not kept
    second = _report(capsys, str(folder), "--format", "json")
    assert json.loads(second)["cache_hit"] is True and len(list(reports.iterdir())) == 1
    assert _report(capsys, str(folder), "--format", "json") == second  # printed back as it was
    for fmt in ("md", "table", "html"):
        assert _report(capsys, str(folder), "--format", fmt) == _report(capsys, str(folder), "--format", fmt)
    with open(folder / TRACE.name, "a") as fh:  # the trace changed: read again, not printed back
        fh.write("\n")
    assert json.loads(_report(capsys, str(folder), "--format", "json"))["cache_hit"] is False


def test_a_finished_run_report_is_printed_back_identical_and_not_after_its_summary_changed(tmp_path, capsys):
    traces = tmp_path / "traces"
    done = subprocess.run([sys.executable, str(REPO / "tools" / "profilectl"), "profile", "--repeat", "1", "--warmup",
                           "0", "--no-sample", "--traces-dir", str(traces), "--", sys.executable, "-c", "pass"],
                          capture_output=True, text=True, env={**os.environ})
    assert done.returncode == 0, done.stderr
    (run,) = traces.iterdir()
    reports = Path(os.environ["PROFILECTL_CACHE_DIR"]) / "reports"
    for fmt in ("json", "table", "md"):
        made = _report(capsys, str(run), "--format", fmt)
        assert _report(capsys, str(run), "--format", fmt) == made
    assert len(list(reports.iterdir())) == 3
    summary = json.loads((run / "summary.json").read_text())
    summary["notes"] = ["a note added after the run"]
    (run / "summary.json").write_text(json.dumps(summary))
    assert "a note added after the run" in _report(capsys, str(run), "--format", "json")


def test_unsettled_summaries_are_never_kept():
    from profilectl.report.render_cache import settled
    run = SimpleNamespace(kind="profilectl-run")
    assert settled(SimpleNamespace(run=SimpleNamespace(status="ok"), job=None, source=run))
    for status in ("running", "abandoned"):
        assert not settled(SimpleNamespace(run=SimpleNamespace(status=status), job=None, source=run))
    assert not settled(SimpleNamespace(run=None, job=object(), source=SimpleNamespace(kind="profilectl-job")))
    assert not settled(SimpleNamespace(run=None, job=None, source=SimpleNamespace(kind="torch"), cache_hit=False))


def test_a_run_probes_afresh_and_keeps_nothing(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    starts = _counting_tool(bin_dir, "nsys", "2024.5.1")
    machine = Machine(root=tmp_path, path=str(bin_dir))  # remember=False: what profile/trace/counters use
    sources.tools(machine, None)
    sources.tools(machine, None)
    assert _starts(starts) == 2 and not (tmp_path / "cache").exists()


def _smi(bin_dir: Path, lines: list[str]) -> Path:
    starts = bin_dir / "smi.starts"
    text = "".join(f"echo '{line}'\n" for line in lines)
    (bin_dir / "nvidia-smi").write_text(f"#!/bin/sh\necho x >> {starts}\n{text}")
    (bin_dir / "nvidia-smi").chmod(0o755)
    return starts


def test_nvidia_gpu_listing_is_kept_until_a_gpu_is_added(tmp_path):
    bin_dir, root = tmp_path / "bin", tmp_path / "root"
    bin_dir.mkdir()
    (root / "dev").mkdir(parents=True)
    (root / "dev" / "nvidia0").write_text("")
    h200 = "0, NVIDIA H200, 143771, 9.0"
    starts = _smi(bin_dir, [h200])
    machine = Machine(root=root, path=str(bin_dir), remember=True)
    assert [g.name for g in sources.nvidia_gpus(machine)] == ["NVIDIA H200"]
    assert sources.nvidia_gpus(machine) == sources.nvidia_gpus(machine)
    assert _starts(starts) == 1
    os.utime(bin_dir / "nvidia-smi", ns=(1, 1))  # the same nvidia-smi file ...
    (root / "dev" / "nvidia1").write_text("")  # ... and a second GPU granted: listed again
    (bin_dir / "nvidia-smi").write_text((bin_dir / "nvidia-smi").read_text().replace(
        f"echo '{h200}'\n", f"echo '{h200}'\necho '1, NVIDIA H200, 143771, 9.0'\n"))
    os.utime(bin_dir / "nvidia-smi", ns=(1, 1))
    assert [g.index for g in sources.nvidia_gpus(machine)] == [0, 1]
    assert _starts(starts) == 2


def test_a_folder_linking_to_another_folder_is_never_kept(tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(TRACE, elsewhere / TRACE.name)
    folder = tmp_path / "trace"
    folder.mkdir()
    shutil.copy(TRACE, folder / TRACE.name)
    (folder / "linked").symlink_to(elsewhere)
    for _ in range(3):
        _report(capsys, str(folder), "--format", "json")
    assert not (Path(os.environ["PROFILECTL_CACHE_DIR"]) / "reports").exists()


def _on_terminal(argv: list[str], env: dict[str, str], columns: int) -> bytes:
    """What argv prints on a terminal of this many columns (a real pseudo-terminal)."""
    import fcntl
    import pty
    import struct
    import termios
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen(argv, stdout=slave, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    out = read_terminal(master)
    proc.wait()
    os.close(master)
    return out


def test_a_table_on_a_terminal_is_printed_back_byte_for_byte_per_terminal_size(tmp_path):
    folder = tmp_path / "trace"
    folder.mkdir()
    shutil.copy(TRACE, folder / TRACE.name)
    env = {**os.environ, "TERM": "xterm-256color"}
    argv = [sys.executable, str(REPO / "tools" / "profilectl"), "report", str(folder)]
    _on_terminal(argv, env, 120)  # the summary cached; "cached summary" from the next one on
    made = _on_terminal(argv, env, 120)
    assert b"\x1b[" in made  # coloured, as rich writes to a terminal
    assert _on_terminal(argv, env, 120) == made
    narrow = _on_terminal(argv, env, 70)
    assert len(list((Path(os.environ["PROFILECTL_CACHE_DIR"]) / "reports").iterdir())) == 2
    assert _on_terminal(argv, env, 70) == narrow


def test_an_assessment_is_not_read_back_after_a_tool_file_changed(machine):
    from profilectl.assessment_cache import env_report_dict
    from profilectl.probe import probe
    smi = machine.tool("nvidia-smi", "0, NVIDIA H200, 143771, 9.0\n")
    facts = probe(machine.root, path=str(machine.bin), env=dict(machine.env))
    env_report_dict(facts)
    env_report_dict(facts)
    folder = Path(os.environ["PROFILECTL_CACHE_DIR"]) / "assessments"
    assert len(list(folder.glob("*.json"))) == 1
    os.utime(smi, ns=(10**18, 10**18))  # the same facts, but the file behind a tool is another
    env_report_dict(facts)
    assert len(list(folder.glob("*.json"))) == 2
