"""ROCm 7.3 and releases newer than profilectl's table: counters without plain-text input (the 7.3
double rejects `.txt` as the CHANGELOG says 7.3 does), the pass_<n>/ outputs read, and a release
newer than the table judged from its own --help, read once and cached per tool path and mtime."""

import json
import os
import subprocess

from cli_support import WORKLOAD, amd_machine, cli, json_run
from profilectl.probe.rocprofv3_help import parse_help


def test_the_73_double_rejects_text_input(machine, tmp_path):
    amd_machine(machine, tmp_path, rocm="7.3.0")
    (tmp_path / "in.txt").write_text("pmc: SQ_WAVES\n")
    done = subprocess.run([str(machine.bin / "rocprofv3"), "-i", str(tmp_path / "in.txt"), "--kernel-trace", "--",
                           "true"], capture_output=True, text=True, env=dict(os.environ, FAKE_ROCM_RELEASE="7.3"))
    assert done.returncode != 0 and "plain-text counter input is no longer supported" in done.stderr


def test_counters_on_73_use_repeated_pmc_and_read_each_pass(machine, tmp_path):
    amd_machine(machine, tmp_path, rocm="7.3.0")
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
    amd_machine(machine, tmp_path, rocm="7.14.0")
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
        assert "newer than the releases profilectl knows (7.3)" in notes and "--help" in notes
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
    machine.rocm("7.3.0")  # another release lists again
    cli(machine, "counters", "--dry-run", "--", *WORKLOAD, extra_env={"FAKE_ROCM_RELEASE": "7.3"})
    assert calls.read_text() == "xx"


def test_counters_dry_run_says_when_names_cannot_be_validated(machine, tmp_path):
    amd_machine(machine, tmp_path, rocm="7.2.1")
    machine.tool("rocprofv3-avail", "", exit_code=1)
    done = cli(machine, "counters", "--dry-run", "--json", "--", *WORKLOAD, extra_env={"FAKE_LIST_AVAIL": "/nonexistent"})
    notes = " ".join(json.loads(done.stdout)["notes"])
    assert done.returncode == 0 and "names not validated" in notes, notes


def test_gfx1250_counters_and_pc_sampling_follow_the_data(machine, tmp_path):
    amd_machine(machine, tmp_path, gfx=120500, rocm="7.3.0")  # KFD gfx_target_version of gfx1250
    report = machine.probe()
    assert report.facts.gpus[0].arch == "gfx1250"
    counters = report.assessment.capabilities["counters"]
    assert not counters.available and "7.13" in counters.reason
    machine.rocm("7.14.0")
    report = machine.probe()
    assert report.assessment.capabilities["counters"].available
    assert report.assessment.capabilities["pc_sampling"].available
