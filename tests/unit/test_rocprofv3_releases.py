"""Every preset, counter set, bound, rank selection and the attach form, planned for each ROCm
release from 6.2 to the newest profilectl knows, parses with that release's rocprofv3 command line as
profiling/tools/rocprofv3.yaml records it (option, first and last release, what it takes: read from
each release's rocprofv3.py, or the CHANGELOG where marked inferred), and the counter input file
passes that release's input rules (re-stated below as facts from each release's parse_input). An
option passed to a release that lacks it, a format it does not know, a value-taking option left
without its value, or an input file the release would reject fails here."""

import argparse
import json
import os
import sys

import pytest

from profilectl import countersets
from profilectl.backends.rocprofv3 import (counter_input_form, has, level_of_rocm, point, presets, reaches,
                                           sdk_of_rocm, tool_facts)
from profilectl.errors import UsageError
from profilectl.plan import make_plan
from profilectl.probe.sources import version_tuple
from profilectl.request import Attach, Bounds, Request

# ten releases: 7.2.4 ships rocprofiler-sdk 1.3.0 like the 7.13 preview; there is no ROCm 7.3
RELEASES = ("6.2", "6.3", "6.4", "7.0", "7.1", "7.2", "7.2.4", "7.13", "7.14", "10.0.0")
MULTI_PASS_SDK = (1, 3, 0)  # repeated --pmc, --kfd-trace, no .txt input (CHANGELOG 1.3.0)


def sdk(release: str) -> tuple[int, ...]:
    """The rocprofiler-sdk the release ships (profiling/tools/rocprofv3.yaml `releases`)."""
    found = sdk_of_rocm(version_tuple(release))
    assert found is not None, release
    return found


def rocm_version(release: str) -> str:
    return release if release.count(".") == 2 else f"{release}.1"
NARGS = {"flag": 0, "value": None, "values": "+", "optional-values": "*", "optional-value": "?"}
APP = [sys.executable, "-c", "pass"]


class ReleaseParser(argparse.ArgumentParser):
    def error(self, message: str):  # raise instead of printing usage and exiting
        raise AssertionError(f"{self.prog}: {message}")


def parser_for(release: str) -> ReleaseParser:
    level = version_tuple(release)
    parser = ReleaseParser(prog=f"rocprofv3 {release}", add_help=False, allow_abbrev=False)
    for option, entry in tool_facts()["options"].items():
        if not has("options", option, level):
            continue
        kind = entry["takes"]
        if kind == "flag":
            parser.add_argument(option, action="store_true")
        elif option == "--output-format":
            formats = [f for f in tool_facts()["output_formats"] if has("output_formats", f, level)]
            parser.add_argument(option, nargs="+", choices=formats)
        elif option == "--pmc" and reaches(level_of_rocm(level), point(str(entry["repeatable_since"]))):
            parser.add_argument(option, nargs="*", action="append")  # each --pmc one pass
        elif kind == "optional-value":  # rocprofv3's boolean options: bare = true (nargs ?, const True)
            parser.add_argument(option, nargs="?", const=True)
        else:
            parser.add_argument(option, nargs=NARGS[kind])
    parser.add_argument("application", nargs=argparse.REMAINDER)
    return parser


# ------------------------------------------------------------------ each release's input rules
# 6.2 parse_input: .txt (pmc: lines), .yaml/.yml/.json with {"metrics": [{"pmc": [names]}]};
# 6.3-7.2: .txt, or {"jobs": [job]} where a job's keys are rocprofv3 options by argparse dest and
# pmc is a list of names; SDK 1.3.0+ (7.2.4, 7.13 and later): JSON/YAML only (text removed).
def job_keys(release: str) -> set[str]:
    level = version_tuple(release)
    return {o.lstrip("-").replace("-", "_") for o in tool_facts()["options"] if o.startswith("--")
            and has("options", o, level)}


def accepts_input(release: str, name: str, text: str) -> list[list[str]]:
    """The passes `release` reads from this input file, or AssertionError naming why it rejects it."""
    level = version_tuple(release)
    extension = os.path.splitext(name)[1]
    if extension in (".txt", ".text"):
        assert sdk(release) < MULTI_PASS_SDK, f"{release} reads no plain-text counter input"
        return [line.split(":", 1)[1].split() for line in text.splitlines() if line.strip().startswith("pmc:")]
    assert extension == ".json", f"{release}: profilectl writes JSON input, not {extension}"
    document = json.loads(text)
    key = "metrics" if level < (6, 3) else "jobs"
    assert isinstance(document, dict) and set(document) == {key}, f"{release} reads the {key!r} list only"
    passes = []
    for job in document[key]:
        assert isinstance(job, dict) and isinstance(job.get("pmc"), list) and job["pmc"], job
        assert all(isinstance(c, str) and c and " " not in c for c in job["pmc"]), job
        if key == "jobs":
            unknown = set(job) - job_keys(release) - {"pmc"}
            assert not unknown, f"{release} has no option {unknown} for a job"
        passes.append(job["pmc"])
    return passes


# ------------------------------------------------------------------ plans
@pytest.fixture
def mi300x(machine):
    machine.kfd_gpu(1, 90402, perf_level="profile_standard")
    machine.tool("rocprofv3")
    return machine


def plan_for(machine, release: str, **request):
    machine.rocm(rocm_version(release))
    facts = machine.probe().facts
    request.setdefault("workload", tuple(APP))
    plan = make_plan(Request(**request), facts, machine.root / "run")
    assert plan.backend == "rocprofv3", plan.reason
    return plan, facts


def check(argv, release: str, app=APP) -> argparse.Namespace:
    argv = list(argv)
    parsed = parser_for(release).parse_args(argv[1:])
    application = [a for a in parsed.application if a != "--"]
    if app is not None:
        assert argv[argv.index("--") + 1:] == application == app
    return parsed


# pc-sampling before 6.4 is refused with exit 3 (test_amd_releases), so it has no argv to parse.
PRESET_RELEASES = [(preset, release) for preset in presets() for release in RELEASES
                   if preset != "pc-sampling" or version_tuple(release) >= (6, 4)]


@pytest.mark.parametrize("preset, release", PRESET_RELEASES)
def test_every_preset_parses_with_each_release(mi300x, release, preset):
    plan, _ = plan_for(mi300x, release, service="trace", preset=preset)
    parsed = check(plan.argv, release)
    rocpd_first = preset != "pc-sampling" and version_tuple(release) >= (7, 0)
    if rocpd_first:  # no `rocpd convert` on this machine: rocprofv3 also writes the Perfetto trace
        assert parsed.output_format == ["rocpd", "pftrace"]
    assert ("csv" in parsed.output_format) is not rocpd_first
    if preset == "sys":
        assert parsed.sys_trace and bool(getattr(parsed, "kfd_trace", False)) is (sdk(release) >= MULTI_PASS_SDK)


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("counter_set", countersets.available_sets())
def test_every_counter_set_parses_and_its_input_passes_the_release_rules(mi300x, release, counter_set):
    plan, _ = plan_for(mi300x, release, service="counters", counter_set=counter_set)
    parsed = check(plan.argv, release)
    assert parsed.kernel_trace
    expected = [list(p) for p in plan.counter_set.passes]
    if sdk(release) >= MULTI_PASS_SDK:  # repeated --pmc, no input file at all
        assert parsed.i is None and not plan.phases[0].input_files
        assert parsed.pmc == expected
    else:
        (name, text), = plan.phases[0].input_files.items()
        assert parsed.i == str(mi300x.root / "run" / name) and name == "raw/input.json"
        assert accepts_input(release, name, text) == expected


BOUNDS = {
    "kernel": (Bounds(kernel="gemm"), "6.3", lambda p: p.kernel_include_regex == "gemm"),
    "exclude": (Bounds(exclude_kernel="copy"), "6.3", lambda p: "copy" in p.kernel_exclude_regex),
    "window": (Bounds(launch_skip=2, launch_count=3), "6.3", lambda p: p.kernel_iteration_range == ["[3-5]"]),
}


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("bound", sorted(BOUNDS))
@pytest.mark.parametrize("service", ["trace", "counters"])
def test_every_bound_parses_or_is_refused_by_each_release(mi300x, release, bound, service):
    bounds, first, holds = BOUNDS[bound]
    if version_tuple(release) < version_tuple(first):
        with pytest.raises(UsageError, match="cannot honour"):
            plan_for(mi300x, release, service=service, bounds=bounds)
        return
    plan, _ = plan_for(mi300x, release, service=service, bounds=bounds)
    assert holds(check(plan.argv, release))


@pytest.mark.parametrize("release", RELEASES)
def test_rank_selection_is_the_release_option_or_the_rank_gate(mi300x, release):
    mpirun = ("mpirun", "-np", "9", *APP)  # ranks 0-8: every listed rank exists (rank 8 of -np 4 is refused)
    mi300x.tool("mpirun")
    os.environ["PATH"] = f"{mi300x.bin}{os.pathsep}{os.environ['PATH']}"
    try:
        plan, _ = plan_for(mi300x, release, service="trace", workload=mpirun, ranks=(0, 1, 2, 3, 8))
    finally:
        os.environ["PATH"] = os.environ["PATH"].split(os.pathsep, 1)[1]
    argv = list(plan.argv)
    assert argv[:3] == ["mpirun", "-np", "9"]
    if version_tuple(release) >= (7, 2):
        assert check(argv[3:], release).profile_mpi_ranks == "0-3,8"
    else:  # the gate: python -I -S rank_gate.py --ranks 0-3,8 --rank-env ... -- rocprofv3 ... -- app
        assert argv[7:9] == ["--ranks", "0-3,8"] and argv[6].endswith("rank_gate.py")
        check(argv[argv.index("--") + 1:], release)


@pytest.mark.parametrize("release", [r for r in RELEASES if version_tuple(r) >= (7, 1)])
@pytest.mark.parametrize("service", ["trace", "counters"])
def test_the_attach_form_parses_with_each_release_that_attaches(mi300x, release, service):
    attach = Attach(pid=os.getpid(), duration_s=2.5, uid=0, cmdline=("python3", "serve.py"), attach_env=True,
                    ptrace_scope=1)
    counters = {"counter_set": "basic"} if service == "counters" else {}
    plan, _ = plan_for(mi300x, release, service=service, attach=attach, workload=attach.cmdline, **counters)
    session = list(plan.argv)
    assert session[3].endswith("attach_session.py") and session[4:8] == ["--pid", str(os.getpid()), "--duration", "2.5"]
    tool = session[session.index("--") + 1:]
    parsed = check(tool, release, app=None)
    assert parsed.attach == str(os.getpid()) and parsed.attach_duration_msec == "2500" and not parsed.application
    assert plan.workload == ("python3", "serve.py")


def test_counter_input_form_per_release(mi300x):
    forms = {}
    for release in RELEASES:
        mi300x.rocm(rocm_version(release))
        forms[release] = counter_input_form(mi300x.probe().facts)["form"]
    assert forms == {"6.2": "metrics-json", "6.3": "jobs-json", "6.4": "jobs-json", "7.0": "jobs-json",
                     "7.1": "jobs-json", "7.2": "jobs-json", "7.2.4": "pmc-flags", "7.13": "pmc-flags",
                     "7.14": "pmc-flags", "10.0.0": "pmc-flags"}


def test_release_facts_hold_the_corrections_from_the_sources():
    """What the first version had wrong, checked against each release's rocprofv3.py."""
    assert not has("options", "--rccl-trace", (6, 2)) and has("options", "--rccl-trace", (6, 3))
    assert not has("options", "--memory-allocation-trace", (6, 3)) and has("options", "--memory-allocation-trace", (6, 4))
    assert not has("options", "--pc-sampling-method", (6, 3)) and has("options", "--pc-sampling-method", (6, 4))
    assert has("options", "--list-metrics", (6, 3)) and not has("options", "--list-metrics", (6, 4))
    assert not has("output_formats", "rocpd", (6, 4)) and has("output_formats", "rocpd", (7, 0))
    assert not has("placeholders", "%hostname%", (6, 2)) and has("placeholders", "%rank%", (6, 2))
    for option in ("--kernel-include-regex", "--kernel-exclude-regex", "--kernel-iteration-range", "--pmc"):
        assert has("options", option, (6, 3)) and not has("options", option, (6, 2)), option
    for option in ("--collection-period", "--att", "--selected-regions"):
        assert has("options", option, (7, 0)), option
    assert not has("options", "--attach", (7, 0)) and has("options", "--attach", (7, 1))
    assert not has("options", "--profile-mpi-ranks", (7, 1)) and has("options", "--profile-mpi-ranks", (7, 2))
    assert not has("options", "--kfd-trace", (7, 2, 1)) and has("options", "--kfd-trace", (7, 2, 4))
    assert has("options", "--kfd-trace", (7, 13)) and not has("options", "--attach-sync-output", (7, 13))
    assert has("options", "--attach-sync-output", (7, 14)) and has("options", "--attach-sync-output", (10, 0, 0))
    # kernel replay was read in develop only: never placed by version, only by the tool's --help
    assert not has("options", "--kernel-replay-beta-enabled", (10, 0, 0))
    assert all(entry.get("source") for entry in tool_facts()["options"].values())
    assert all(entry.get("source") for entry in tool_facts()["counter_input"])
