"""profilectl's report on the corpus of real public traces (tests/fixtures/real/) against numbers
computed without profilectl (tests/fixtures/real/compute_expected.py: exact decimal sums over the
JSON text, SQL over the Nsight Systems exports), and against the verdict an engineer gives each.

Each trace is reported once per test session, the way `profilectl report PATH --format json`
does it (load, then the JSON export), and both tests read that one report."""

import json
from pathlib import Path

import pytest

from support import FIXTURES
from profilectl.errors import FormatError
from profilectl.read import load
from profilectl.report import export

CORPUS = FIXTURES / "real"
EXPECTED = json.loads((CORPUS / "expected.json").read_text())["traces"]
KINDS = ("kernel", "memcpy", "memset")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The trace's `report --format json` document, read once per trace and shared by both tests
    (the cache folder is the calling test's temporary one, set by conftest.py). A job whose ranks
    lie in different folders (`members`) is read from a folder of links."""
    done: dict[str, dict] = {}

    def get(trace_id: str) -> dict:
        if trace_id not in done:
            entry = EXPECTED[trace_id]
            path = FIXTURES / entry["path"]
            if entry.get("members"):
                path = tmp_path_factory.mktemp(trace_id)
                for member in entry["members"]:
                    (path / Path(member).name).symlink_to(FIXTURES / member)
            try:
                done[trace_id] = json.loads(export.to_json(load.load(path)))
            except FormatError as exc:  # what `report` prints as its one-line error (exit 2)
                done[trace_id] = {"error": str(exc)}
        return done[trace_id]
    return get


def _whole(value: float | int | None) -> int | float | None:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _copies(doc: dict) -> dict[str, dict[str, int | float]]:
    out = {kind: {"count": 0, "total_ns": 0} for kind in ("memcpy", "memset")}
    for row in doc.get("memory_copies") or []:
        kind = "memset" if row["name"].lower().startswith("memset") else "memcpy"
        out[kind]["count"] += row["calls"]
        out[kind]["total_ns"] += row["total_ns"]
    return out


def _timeline_rows(doc: dict) -> dict[str, dict]:
    timeline = doc.get("timeline") or {}
    rows = {row["rank"]: row for row in timeline.get("ranks") or []}
    if not rows and timeline.get("merged"):
        rows = {timeline["merged"]["rank"]: timeline["merged"]}
    return rows


def _match_rank(label: str, expected_ranks: dict) -> str | None:
    """profilectl names a rank after its file (without .gz; an nsys export without .sqlite)."""
    if len(expected_ranks) == 1:
        return next(iter(expected_ranks))
    for name in expected_ranks:
        if label in (name, name.removesuffix(".sqlite")):
            return name
    return None


def disagreements(trace_id: str, doc: dict) -> list[str]:
    """Every raw number of the report that differs from expected.json, one line each."""
    want = EXPECTED[trace_id]
    if "error" in doc:
        return [f"not read: {doc['error']}"]
    found: list[str] = []

    def check(field: str, expected, got) -> None:
        if _whole(got) != expected:
            found.append(f"{field}: expected {expected!r}, got {got!r}")

    kernels = doc.get("kernels") or []
    copies = _copies(doc)
    got_totals = {"kernel": {"count": sum(k["calls"] for k in kernels),
                             "total_ns": sum(k["total_ns"] for k in kernels)}, **copies}
    for kind in KINDS:
        for key in ("count", "total_ns"):
            check(f"{kind} {key}", want["totals"][kind][key], got_totals[kind][key])

    ranks = want["ranks"]
    if len(ranks) == 1:  # the kernel table of a one-rank trace: the three heaviest, exactly
        top = next(iter(ranks.values()))["top_kernels"]
        heaviest = sorted(kernels, key=lambda k: (-k["total_ns"], k["name"]))[:len(top)]
        check("top kernels", [(t["name"], t["count"], t["total_ns"]) for t in top],
              [(k["name"], k["calls"], _whole(k["total_ns"])) for k in heaviest])

    rows = _timeline_rows(doc)
    seen = {}
    for label, row in rows.items():
        name = _match_rank(label, ranks)
        if name is not None:
            seen[name] = row
    for name, rank in ranks.items():
        row = seen.get(name)
        if row is None:
            if rank["kernel"]["count"] + rank["memcpy"]["count"] + rank["memset"]["count"]:
                found.append(f"rank {name}: no timeline row (ranks in the report: {sorted(rows)})")
            continue
        check(f"rank {name} busy_ns", rank["busy_ns"], row["busy_ns"])
        check(f"rank {name} span_ns", rank["span_ns"], row["span_ns"])

    if len(ranks) > 1:  # per-rank kernel figures of a job
        per_rank = {_match_rank(r["rank"], ranks): r for r in doc.get("ranks") or []}
        for name, rank in ranks.items():
            row = per_rank.get(name)
            check(f"rank {name} kernel count", rank["kernel"]["count"], row and row["dispatches"])
            check(f"rank {name} kernel total_ns", rank["kernel"]["total_ns"], row and row["total_ns"])

    # steps: a one-rank trace's own; a job's, per step, its slowest rank's (the report's job table)
    steps = (doc.get("timeline") or {}).get("steps") or []
    got_steps = [[s["name"], s["wall_ns"]] for s in steps]
    want_steps = [[name, ns] for name, ns in want["job_steps"].items()]
    if want["format"] == "xla":  # the derived Steps line: its events' names are not step numbers
        got_steps, want_steps = [ns for _, ns in got_steps], [ns for _, ns in want_steps]
    if want_steps or got_steps:
        check("steps (name, ns)", want_steps, got_steps)
    return found


@pytest.mark.parametrize("trace_id", sorted(EXPECTED))
def test_real_corpus_raw_numbers(trace_id, report):
    """Kernel, memcpy and memset counts and times, busy time and span per rank, host steps and the
    top kernels equal the independent computation to the ns."""
    found = disagreements(trace_id, report(trace_id))
    assert not found, f"{trace_id}: " + "; ".join(found)


@pytest.mark.parametrize("trace_id", sorted(EXPECTED))
def test_real_corpus_verdicts(trace_id, report):
    """The headline finding's verdict is the one an engineer gives the trace (README.md says why)."""
    want = EXPECTED[trace_id]
    findings = (report(trace_id).get("diagnosis") or {}).get("findings") or []
    got = findings[0]["verdict"] if findings else None
    assert got == want["verdict"], f"{trace_id}: expected {want['verdict']} ({want['why']}); " \
                                   f"profilectl says {findings[0]['sentence'] if findings else 'nothing'}"


def test_in_process_report_is_the_cli_report(report):
    """The reports compared above are what `profilectl report PATH --format json` prints."""
    import subprocess
    import sys

    from support import REPO
    done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "report",
                           str(FIXTURES / EXPECTED["nsys-bitonic-sort-1050"]["path"]), "--format", "json"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    printed, read = json.loads(done.stdout), dict(report("nsys-bitonic-sort-1050"))
    for doc in (printed, read):
        doc.pop("cache_hit", None)  # whether the summary came from the cache: the second read's did
    assert printed == read
