"""rocprofiler-sdk 1.3.0 and later (ROCm 7.2.4, the 7.13 preview, 7.14, 10.0) and releases newer
than profilectl's table: the release placed by the SDK version the tool's own --version prints, not
by its ROCm number; counters without plain-text input (the 1.3.0 double rejects `.txt` as the
CHANGELOG says), the pass_<n>/ outputs read, kernel replay used only where the tool's --help lists
it, and a release newer than the table judged from its own --help, read once and cached per tool
path and mtime."""

import json
import os
import subprocess

import pytest

from cli_support import WORKLOAD, amd_machine, cli, json_run
from profilectl.probe.rocprofv3_help import parse_help


def test_the_sdk_130_double_rejects_text_input(machine, tmp_path):
    amd_machine(machine, tmp_path, rocm="7.13.0")
    (tmp_path / "in.txt").write_text("pmc: SQ_WAVES\n")
    done = subprocess.run([str(machine.bin / "rocprofv3"), "-i", str(tmp_path / "in.txt"), "--kernel-trace", "--",
                           "true"], capture_output=True, text=True, env=dict(os.environ, FAKE_ROCM_RELEASE="7.13.0"))
    assert done.returncode != 0 and "plain-text counter input is no longer supported" in done.stderr


@pytest.mark.parametrize("rocm", ["7.2.4", "7.13.0"])
def test_counters_on_sdk_130_use_repeated_pmc_and_read_each_pass(machine, tmp_path, rocm):
    """7.2.4 ships SDK 1.3.0 as the 7.13 preview does: both take repeated --pmc (a ROCm number
    would have put 7.2.4 with 7.2.1)."""
    amd_machine(machine, tmp_path, rocm=rocm)
    pmc_file = tmp_path / "mine.txt"  # a user's pmc: text set still works: profilectl passes --pmc
    pmc_file.write_text("pmc: SQ_WAVES\npmc: TCC_HIT\n")
    for counter_set, passes in (("extended", 2), (str(pmc_file), 2)):
        result, run = json_run(machine, "counters", "--set", counter_set, "--", *WORKLOAD)
        assert result["status"] == "ok", result["message"]
        argv = result["manifest"]["argv"]
        assert argv.count("--pmc") == passes and "-i" not in argv
        assert not list((run / "raw").glob("*.txt")) and not list((run / "raw").glob("*.json"))
        assert len(list((run / "raw").glob("pass_*/*/*_results.db"))) == passes
        rows = result["summary"]["counters_by_kernel"]
        assert len(rows) == 3 and all("SQ_WAVES" in r and "TCC_HIT" in r for r in rows)


def test_a_release_newer_than_the_table_is_judged_from_its_help(machine, tmp_path, monkeypatch):
    amd_machine(machine, tmp_path, rocm="10.1.0")  # not in the table; its --version prints SDK 1.4.0
    counting = machine.bin / "help-calls"
    real = machine.bin / "rocprofv3"
    text = real.read_text()
    real.write_text(text.replace('argv = sys.argv[1:]\n', f'argv = sys.argv[1:]\nif "--help" in argv: '
                                 f'open({str(counting)!r}, "a").write("x")\n', 1))
    for _ in range(2):
        result, run = json_run(machine, "counters", "--set", "extended", "--", *WORKLOAD)
        assert result["status"] == "ok", result["message"]
        assert result["manifest"]["argv"].count("--pmc") == 2  # its help describes repeated --pmc passes
        notes = " ".join(result["manifest"]["notes"])
        assert "newer than the rocprofiler-sdk releases profilectl knows (1.3.5)" in notes and "--help" in notes
    assert counting.read_text() == "x"  # parsed once, then read from the cache
    trace, _ = json_run(machine, "trace", "--preset", "sys", "--", *WORKLOAD)
    assert "--kfd-trace" in trace["manifest"]["argv"]


def test_help_parser_reads_argparse_layouts():
    facts = parse_help("usage: rocprofv3 [options]\n\noptions:\n"
                       "  -i INPUT, --input INPUT\n                        Input file\n"
                       "  --kernel-trace [BOOL]  For collecting Kernel Dispatch Traces\n"
                       "  --pmc [PMC ...]       Counters. For multi-pass: --pmc \"A B\" --pmc \"C D\" ...\n"
                       "  -f {csv,json,pftrace,otf2,rocpd} [{csv,json,pftrace,otf2,rocpd} ...], "
                       "--output-format {csv,json,pftrace,otf2,rocpd} [{csv,json,pftrace,otf2,rocpd} ...]\n"
                       "                        formats\n"
                       "  -p PID, --pid PID, --attach PID\n"
                       "  --attach-duration-msec ATTACH_DURATION_MSEC\n")
    assert facts.options["--input"] == "value" and facts.options["-i"] == "value"
    assert facts.options["--kernel-trace"] == "optional-value" and facts.options["--pmc"] == "optional-values"
    assert facts.has("--attach") and facts.has("--attach-duration-msec") and facts.multi_pass_pmc
    assert facts.choices["--output-format"] == ("csv", "json", "pftrace", "otf2", "rocpd")


def test_counters_dry_run_validates_names_from_a_listing_kept_per_machine_and_release(machine, tmp_path):
    amd_machine(machine, tmp_path, rocm="7.2.1", sets=("basic",))
    calls = machine.bin / "list-calls"
    real = machine.bin / "rocprofv3"
    real.write_text(real.read_text().replace('argv = sys.argv[1:]\n', f'argv = sys.argv[1:]\nif "-L" in argv: '
                                             f'open({str(calls)!r}, "a").write("x")\n', 1))
    done = cli(machine, "counters", "--dry-run", "--json", "--", *WORKLOAD)
    assert done.returncode == 0 and "validated against the" in " ".join(json.loads(done.stdout)["notes"])
    typo = cli(machine, "counters", "--dry-run", "--set", "extended", "--", *WORKLOAD)  # extended: some not listed
    assert typo.returncode == 2 and "not available on" in typo.stderr and len(typo.stderr.strip().splitlines()) == 1
    assert calls.read_text() == "x"  # listed once for this machine and release, then kept
    machine.rocm("7.13.0")  # another release lists again
    cli(machine, "counters", "--dry-run", "--", *WORKLOAD)
    assert calls.read_text() == "xx"


def test_counters_dry_run_says_when_names_cannot_be_validated(machine, tmp_path):
    amd_machine(machine, tmp_path, rocm="7.2.1")
    machine.tool("rocprofv3-avail", "", exit_code=1)
    done = cli(machine, "counters", "--dry-run", "--json", "--", *WORKLOAD, extra_env={"FAKE_LIST_AVAIL": "/nonexistent"})
    notes = " ".join(json.loads(done.stdout)["notes"])
    assert done.returncode == 0 and "names not validated" in notes, notes


def test_gfx1250_counters_and_pc_sampling_follow_the_data(machine, tmp_path):
    amd_machine(machine, tmp_path, gfx=120500, rocm="7.2.1")  # KFD gfx_target_version of gfx1250
    report = machine.probe()
    assert report.facts.gpus[0].arch == "gfx1250"
    counters = report.assessment.capabilities["counters"]
    assert not counters.available and "7.13" in counters.reason
    machine.rocm("7.14.0")
    report = machine.probe()
    assert report.assessment.capabilities["counters"].available
    assert report.assessment.capabilities["pc_sampling"].available


def test_the_sdk_version_comes_from_the_tools_own_version(machine, tmp_path):
    """A 7.2.1 install whose rocprofv3 says it is SDK 1.3.0 (a newer rocprofiler-sdk package on an
    older ROCm) is placed at 1.3.0: repeated --pmc and --kfd-trace; and a 7.13 whose tool says
    1.1.0 gets the jobs JSON and no --kfd-trace."""
    for rocm, sdk, pmc_flags in (("7.2.1", "1.3.0", True), ("7.13.0", "1.1.0", False)):
        amd_machine(machine, tmp_path, rocm=rocm)
        env = {"FAKE_SDK_VERSION": sdk}
        result, _ = json_run(machine, "counters", "--set", "extended", "--", *WORKLOAD, extra_env=env)
        assert result["status"] == "ok", result["message"]
        argv = result["manifest"]["argv"]
        assert (argv.count("--pmc") == 2) is pmc_flags and ("-i" in argv) is not pmc_flags
        trace, _ = json_run(machine, "trace", "--preset", "sys", "--", *WORKLOAD, extra_env=env)
        assert ("--kfd-trace" in trace["manifest"]["argv"]) is pmc_flags, trace["manifest"]["argv"]


def test_kernel_replay_is_used_where_the_tools_help_lists_it(machine, tmp_path):
    """A two-pass set: one run of the application with both --pmc groups and the replay options
    where --help lists them (no kernel trace: a replayed dispatch would be counted once per pass),
    two runs (pass_1/, pass_2/) where it does not; never under --attach."""
    amd_machine(machine, tmp_path, rocm="10.0.0")
    replay, run = json_run(machine, "counters", "--set", "extended", "--", *WORKLOAD,
                           extra_env={"FAKE_KERNEL_REPLAY": "1"})
    assert replay["status"] == "ok", replay["message"]
    argv = replay["manifest"]["argv"]
    assert argv.count("--pmc") == 2 and "--kernel-replay-beta-enabled" in argv
    assert argv[argv.index("--replay-mode") + 1] == "kernel" and "--kernel-trace" not in argv
    assert not list((run / "raw").glob("pass_*")) and len(list((run / "raw").glob("*/*_results.db"))) == 1
    rows = replay["summary"]["counters_by_kernel"]
    assert len(rows) == 3 and all("SQ_WAVES" in r and "TCC_HIT" in r for r in rows)
    assert any("kernel replay" in n for n in replay["manifest"]["notes"])
    tool = machine.bin / "rocprofv3"  # the same tool without replay: another file (its --help is kept per file)
    os.utime(tool, ns=(tool.stat().st_atime_ns, tool.stat().st_mtime_ns + 10**9))
    plain, run = json_run(machine, "counters", "--set", "extended", "--", *WORKLOAD)
    assert plain["status"] == "ok" and "--kernel-replay-beta-enabled" not in plain["manifest"]["argv"]
    assert len(list((run / "raw").glob("pass_*/*/*_results.db"))) == 2
