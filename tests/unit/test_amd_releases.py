"""profilectl against each ROCm release's real rocprofv3 behaviour (the doubles emulate each release's
options and counter-listing layout, read from that release's sources): counter validation with
"did you mean" in every layout, legacy listings, unknown layouts, raw rocpd kept from 7.0, the
pc-sampling preset, and options a release lacks."""

import json
from pathlib import Path

import pytest

from cli_support import WORKLOAD, amd_machine, cli, json_run

GFX942, GFX90A, GFX1100 = 90402, 90010, 110000
LAYOUTS = {"6.2.4": "rocprofv3 6.2/6.3", "6.3.1": "rocprofv3 6.2/6.3", "6.4.1": "rocprofv3 6.4",
           "7.0.2": "rocprofv3-avail list", "7.2.1": "rocprofv3-avail list"}


def misspelt_set(tmp_path: Path) -> Path:
    pmc = tmp_path / "mine.txt"
    pmc.write_text("pmc: SQ_WAVES SQ_INSTS_VALUE\n")
    return pmc


@pytest.mark.parametrize("rocm", list(LAYOUTS))
def test_a_misspelt_counter_gets_did_you_mean_in_every_releases_listing(machine, tmp_path, rocm):
    amd_machine(machine, tmp_path, rocm=rocm)
    if rocm >= "7.0":
        machine.double("rocprofv3-avail")  # 7.0+ lists through rocprofv3-avail list --pmc
    done = cli(machine, "counters", "--set", str(misspelt_set(tmp_path)), "--", *WORKLOAD)
    assert done.returncode == 2, done.stderr
    assert "SQ_INSTS_VALUE (did you mean SQ_INSTS_VALU?)" in done.stderr
    result, _ = json_run(machine, "counters", "--set", "basic", "--", *WORKLOAD)
    assert result["status"] == "ok", result["message"]
    validated = [n for n in result["manifest"]["notes"] if "validated against" in n]
    assert validated and LAYOUTS[rocm] in validated[0], result["manifest"]["notes"]


def test_rocprofv3_dash_L_is_used_when_rocprofv3_avail_fails(machine, tmp_path):
    amd_machine(machine, tmp_path, rocm="7.0.2")
    broken = machine.tool("rocprofv3-avail", stderr="Segmentation fault\n", exit_code=139)
    assert broken.exists()
    result, _ = json_run(machine, "counters", "--set", "basic", "--", *WORKLOAD)
    assert any("rocprofv3 -L, rocprofv3 7.0 layout" in n for n in result["manifest"]["notes"]), result["manifest"]["notes"]


@pytest.mark.parametrize("tool", ["rocprof", "rocprofv2"])
def test_legacy_listings_give_did_you_mean(machine, tmp_path, tool):
    machine.kfd_gpu(1, GFX90A)
    machine.rocm("6.1.2")
    machine.double(tool)
    machine.counters_file = tmp_path / "counters.txt"
    machine.counters_file.write_text("SQ_WAVES\nSQ_INSTS_VALU\nTCC_HIT\n")
    done = cli(machine, "counters", "--set", str(misspelt_set(tmp_path)), "--", *WORKLOAD)
    assert done.returncode == 2 and "SQ_INSTS_VALUE (did you mean SQ_INSTS_VALU?)" in done.stderr, done.stderr


def test_legacy_v1_derived_metrics_are_valid_names(machine, tmp_path):
    machine.kfd_gpu(1, GFX90A)
    machine.rocm("6.1.2")
    machine.double("rocprof")
    pmc = tmp_path / "derived.txt"
    pmc.write_text("pmc: GPUBusy SQ_WAVES\n")
    result, _ = json_run(machine, "counters", "--set", str(pmc), "--", *WORKLOAD)
    assert result["status"] == "ok", result["message"]
    assert any("rocprof --list-basic + rocprof --list-derived" in n for n in result["manifest"]["notes"])


def test_a_listing_in_an_unknown_layout_is_a_note_not_a_crash(machine, tmp_path):
    amd_machine(machine, tmp_path, rocm="6.4.1")
    strange = tmp_path / "strange.txt"
    strange.write_text("<<counters>>\nSQ_WAVES; SQ_INSTS_VALU\n")
    result, _ = json_run(machine, "counters", "--set", "basic", "--", *WORKLOAD,
                         extra_env={"FAKE_LIST_AVAIL": str(strange)})
    assert result["status"] == "ok", result["message"]
    notes = " ".join(result["manifest"]["notes"])
    assert "layout profilectl does not know" in notes and "<<counters>>" in notes


@pytest.mark.parametrize("rocm, keeps_rocpd", [("6.4.1", False), ("7.0.2", True)])
def test_rocpd_database_is_kept_and_read_from_70(machine, tmp_path, rocm, keeps_rocpd):
    amd_machine(machine, tmp_path, rocm=rocm)
    result, run = json_run(machine, "trace", "--", *WORKLOAD)
    assert result["status"] == "ok", result["message"]
    argv = result["manifest"]["argv"]
    formats = argv[argv.index("--output-format") + 1:argv.index("-d")]
    assert formats == (["rocpd", "pftrace"] if keeps_rocpd else ["csv", "pftrace"])  # rocpd first from 7.0
    databases = list((run / "raw").glob("*/*_results.db"))
    assert bool(databases) is keeps_rocpd
    assert {o["path"] for o in result["manifest"]["outputs"]} >= {str(d.relative_to(run)) for d in databases}
    summary = result["summary"]
    assert summary["totals"]["dispatches"] == 6 and summary["kernels"][0]["calls"] == 2  # not doubled by the CSV
    assert summary["api"][0]["name"] == "hipLaunchKernel" and summary["api"][0]["calls"] == 3


@pytest.mark.parametrize("converter", ["installed", "failing", "absent"])
def test_rocpd_first_csv_and_perfetto_come_from_amds_converter(machine, tmp_path, converter):
    """ROCm 7+: rocprofv3 writes rocpd only; `rocpd convert` (where installed) makes the CSV and
    Perfetto files and made-by.json says so; the tables are read from the database either way."""
    amd_machine(machine, tmp_path, rocm="7.0.2")
    if converter != "absent":
        machine.double("rocpd")
    extra = {"FAKE_ROCPD_FAIL": "1"} if converter == "failing" else {}
    result, run = json_run(machine, "trace", "--", *WORKLOAD, extra_env=extra)
    assert result["status"] == "ok", result["message"]
    summary = result["summary"]
    assert summary["totals"]["dispatches"] == 6  # the database alone: converted CSVs are not read again
    converted = run / "raw" / "rocpd-convert"
    notes = " ".join(result["manifest"]["notes"])
    if converter == "installed":
        csvs = list(converted.rglob("*_kernel_trace.csv"))
        assert len(csvs) == 1 and len(csvs[0].read_text().splitlines()) == 7
        made_by = json.loads((converted / "made-by.json").read_text())["files"]
        assert set(made_by) == {str(p.relative_to(run / "raw")) for p in converted.rglob("*") if p.name != "made-by.json"
                                and p.is_file()}
        assert all(e["tool"].endswith("rocpd convert") and e["from"].endswith("_results.db") for e in made_by.values())
        assert summary["perfetto_trace"].startswith("raw/rocpd-convert/") and "made by" in notes
    elif converter == "failing":
        assert json.loads((converted / "made-by.json").read_text())["failed"]
        assert summary["perfetto_trace"] is None and "failed" in (run / "stderr.log").read_text()
    else:  # no converter: the database is read, rocprofv3 itself writes the Perfetto trace
        assert not converted.exists() and "rocpd convert is not installed" in notes
        argv = result["manifest"]["argv"]
        assert argv[argv.index("--output-format") + 1:argv.index("-d")] == ["rocpd", "pftrace"]
        assert summary["perfetto_trace"].endswith(".pftrace")


def test_counters_on_70_are_read_from_the_rocpd_database_of_each_pass(machine, tmp_path):
    amd_machine(machine, tmp_path, rocm="7.0.2")
    result, run = json_run(machine, "counters", "--set", "extended", "--", *WORKLOAD)
    assert result["status"] == "ok", result["message"]
    assert len(list((run / "raw").glob("pass_*/*/*_results.db"))) == 2  # JSON jobs: pass_<n>/
    rows = {r["kernel"]: r for r in result["summary"]["counters_by_kernel"]}
    assert len(rows) == 3 and all("SQ_WAVES" in r and "TCC_HIT" in r for r in rows.values())


@pytest.mark.parametrize("rocm, method, unit", [("6.4.1", "host_trap", "time"), ("7.0.2", "stochastic", "cycles")])
def test_pc_sampling_preset_on_instinct(machine, tmp_path, rocm, method, unit):
    amd_machine(machine, tmp_path, gfx=GFX942, rocm=rocm)
    result, run = json_run(machine, "trace", "--preset", "pc-sampling", "--", *WORKLOAD)
    assert result["status"] == "ok", result["message"]
    argv = result["manifest"]["argv"]
    assert argv[argv.index("--pc-sampling-method") + 1] == method
    assert argv[argv.index("--pc-sampling-unit") + 1] == unit
    assert "--pc-sampling-beta-enabled" in argv and "--kernel-trace" in argv
    assert argv[argv.index("--output-format") + 1:argv.index("-d")] == ["csv"]  # rocpd holds no PC samples
    hotspots = result["summary"]["hotspots"]
    # the double's 30 samples: 20 on s_waitcnt, 10 on v_fma, over the first two dispatches (two kernels)
    assert hotspots[0]["instruction"] == "s_waitcnt vmcnt(0)" and len(hotspots) == 4
    assert sum(h["samples"] for h in hotspots if h["instruction"] == "s_waitcnt vmcnt(0)") == 20
    assert {h["kernel"].split("<")[0].split("(")[0] for h in hotspots} == {"void addition_kernel", "subtract_kernel"}
    assert abs(sum(h["percent"] for h in hotspots) - 100) < 1e-6


@pytest.mark.parametrize("gfx, rocm, words", [(GFX1100, "7.0.2", "no PC sampling on gfx1100"),
                                              (GFX942, "6.3.1", "has no PC sampling (from ROCm 6.4)"),
                                              (GFX90A, "6.4.1", None)])
def test_pc_sampling_refusals_are_exit_3_without_falling_back(machine, tmp_path, gfx, rocm, words):
    amd_machine(machine, tmp_path, gfx=gfx, rocm=rocm)
    done = cli(machine, "trace", "--preset", "pc-sampling", "--dry-run", "--json", "--", *WORKLOAD)
    if words is None:  # gfx90a: host trap from 6.4
        plan = json.loads(done.stdout)
        assert plan["backend"] == "rocprofv3" and "host_trap" in plan["phases"][0]["steps"][0]["argv"]
        return
    assert done.returncode == 3 and words in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_communication_preset_on_62_leaves_out_rccl_tracing(machine, tmp_path):
    amd_machine(machine, tmp_path, rocm="6.2.4")
    result, _ = json_run(machine, "trace", "--preset", "communication", "--", *WORKLOAD)
    assert result["status"] == "ok", result["message"]  # the 6.2 double rejects --rccl-trace, like 6.2's argparse
    assert "--rccl-trace" not in result["manifest"]["argv"]
    assert any("--rccl-trace not in rocprofiler-sdk 0.4.0 (ROCm 6.2.4" in n for n in result["manifest"]["notes"])
