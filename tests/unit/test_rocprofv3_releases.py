"""Every preset and counter set, planned for each ROCm release, parses with that release's rocprofv3
command line as profiling/tools/rocprofv3.yaml records it (option, first and last release, what it
takes: read from each release's rocprofv3.py). An option passed to a release that lacks it, a
format it does not know, or a value-taking option left without its value fails here."""

import argparse
import sys

import pytest

from profilectl import countersets
from profilectl.backends.rocprofv3 import has, presets, tool_facts
from profilectl.plan import make_plan
from profilectl.probe.sources import version_tuple
from profilectl.request import Request

RELEASES = ("6.2", "6.3", "6.4", "7.0", "7.2")
NARGS = {"flag": 0, "value": None, "values": "+", "optional-values": "*"}


class ReleaseParser(argparse.ArgumentParser):
    def error(self, message: str):  # raise instead of printing usage and exiting
        raise AssertionError(message)


def parser_for(release: str) -> ReleaseParser:
    level = version_tuple(release)
    parser = ReleaseParser(prog=f"rocprofv3 {release}", add_help=False)
    for option, entry in tool_facts()["options"].items():
        if not has("options", option, level):
            continue
        kind = entry["takes"]
        if kind == "flag":
            parser.add_argument(option, action="store_true")
        elif option == "--output-format":
            formats = [f for f in tool_facts()["output_formats"] if has("output_formats", f, level)]
            parser.add_argument(option, nargs="+", choices=formats)
        else:
            parser.add_argument(option, nargs=NARGS[kind])
    parser.add_argument("application", nargs=argparse.REMAINDER)
    return parser


def planned_argv(machine, release: str, **request) -> list[str]:
    machine.rocm(f"{release}.1")
    facts = machine.probe().facts
    plan = make_plan(Request(workload=(sys.executable, "-c", "pass"), **request), facts, machine.root / "run")
    assert plan.backend == "rocprofv3", plan.reason
    return list(plan.argv)


@pytest.fixture
def mi300x(machine):
    machine.kfd_gpu(1, 90402, perf_level="profile_standard")
    machine.tool("rocprofv3")
    return machine


def check(argv: list[str], release: str) -> argparse.Namespace:
    parsed = parser_for(release).parse_args(argv[1:])
    application = [a for a in parsed.application if a != "--"]
    assert argv[argv.index("--") + 1:] == application == [sys.executable, "-c", "pass"]
    return parsed


# pc-sampling before 6.4 is refused with exit 3 (test_amd_releases), so it has no argv to parse.
PRESET_RELEASES = [(preset, release) for preset in presets() for release in RELEASES
                   if preset != "pc-sampling" or version_tuple(release) >= (6, 4)]


@pytest.mark.parametrize("preset, release", PRESET_RELEASES)
def test_every_preset_parses_with_each_release(mi300x, release, preset):
    argv = planned_argv(mi300x, release, service="trace", preset=preset)
    parsed = check(argv, release)
    assert parsed.output_format[0] == "csv"
    assert ("rocpd" in parsed.output_format) is (preset != "pc-sampling" and version_tuple(release) >= (7, 0))


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("counter_set", countersets.available_sets())
def test_every_counter_set_parses_with_each_release(mi300x, release, counter_set):
    argv = planned_argv(mi300x, release, service="counters", counter_set=counter_set)
    parsed = check(argv, release)
    assert parsed.i and parsed.kernel_trace


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
    assert all(entry.get("source") for entry in tool_facts()["options"].values())
