#!/usr/bin/env python3
"""Reading at scale: profilectl beside the alternatives, in one interleaved run.

Generates (once, into --workdir, with bench/gen_trace.py) and reads:
- csv:    a rocprofv3 kernel_trace.csv of --dispatches dispatches (ROCm 7.0 layout);
- rocpd:  a rocpd database of the same dispatches;
- torch:  a torch.profiler Chrome trace of --events events (kineto's layout), as .json and .json.gz;
          peers: ijson, orjson, the stdlib json and a straight msgspec chunk reader (the hand-written limit);
- ranks:  --ranks processes' files of --rank-dispatches each, beside one file of all of them
          (CSV and rocpd): reading one file per rank must not cost more than 1.5x one big file;
- start:  `env-check --json` and `report` of a finished run (fixed cost: imports, start-up).

profilectl is measured as a user gets it: `pip install` of this checkout, no extras, into a venv of
its own under --workdir (--from-checkout: tools/profilectl of this checkout, with whatever its venv
holds, connectorx included). The peers run in the Python that runs this script (`pip install
.[bench]`). At the end, issue 26's targets are printed as met or MISSED with their figures.

Each measurement is its own process: wall seconds and that process's peak RSS (wait4, children
included). Every figure is the median of --repeat rounds; within a round the measurements run one
after the other, so slow spells of a shared machine hit every line alike. The slowest baselines
(pandas, pyarrow, json + pandas) run in the first round only. Ratios are to profilectl's first
ingest of the same input. Results are checked: every kernel's calls and total time from profilectl
equal polars' (CSV), SQLite's (rocpd) and ijson's / orjson's (torch).

    python3 bench/ingest.py [--dispatches 1000000,10000000] [--events 2000000] [--ranks 8]
                            [--rank-dispatches 1000000] [--repeat 3] [--only csv,rocpd,torch,ranks,start]
                            [--skip pandas,pyarrow,duckdb,json] [--workdir /tmp/profilectl-bench]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
CHECKOUT = [sys.executable, str(REPO / "tools" / "profilectl")]
PROFILECTL = CHECKOUT

# Reference scripts: argv[1] the input, argv[2] where to write {kernel: [calls, total_ns]}.
POLARS = """
import json, polars as pl, sys
d = pl.col("End_Timestamp") - pl.col("Start_Timestamp")
out = (pl.scan_csv(sys.argv[1]).group_by("Kernel_Name")
       .agg(pl.len().alias("n"), d.sum().alias("t"), d.min().alias("lo"), d.max().alias("hi"), d.std().alias("s"))
       .collect(engine="streaming"))
json.dump({k: [n, t] for k, n, t in out.select("Kernel_Name", "n", "t").iter_rows()}, open(sys.argv[2], "w"))
"""
DUCKDB = """
import duckdb, sys
con = duckdb.connect(); con.execute("SET memory_limit='256MB'")
d = "(End_Timestamp - Start_Timestamp)"
print(len(con.execute(f"SELECT Kernel_Name, count(*), sum({d}), min({d}), max({d}), stddev_pop({d}) "
                      "FROM read_csv(?) GROUP BY 1", [sys.argv[1]]).fetchall()))
"""
PYARROW = """
import pyarrow.csv as pc, pyarrow.compute as c, sys
t = pc.read_csv(sys.argv[1])
t = t.append_column("d", c.subtract(t["End_Timestamp"], t["Start_Timestamp"]))
print(t.group_by("Kernel_Name").aggregate([("d", "count"), ("d", "sum"), ("d", "min"), ("d", "max"), ("d", "stddev")]).num_rows)
"""
PANDAS = """
import pandas as pd, sys
df = pd.read_csv(sys.argv[1])
df["d"] = df.End_Timestamp - df.Start_Timestamp
print(len(df.groupby("Kernel_Name")["d"].agg(["count", "sum", "min", "max", "std"])))
"""
# rocpd's own views name each dispatch through the symbol table and group by that name
# (the `kernels` / `top_kernels` views): the same work, as one SQL statement.
ROCPD_VIEW_SQL = """
import json, sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
rows = db.execute('SELECT S.display_name, count(*), sum(K."end" - K.start), min(K."end" - K.start), '
                  'max(K."end" - K.start) FROM rocpd_kernel_dispatch K JOIN rocpd_info_kernel_symbol S '
                  'ON S.id = K.kernel_id AND S.guid = K.guid GROUP BY S.display_name ORDER BY 3 DESC').fetchall()
json.dump({k: [n, t] for k, n, t, _, _ in rows}, open(sys.argv[2], "w"))
"""
# Chrome traces: kernel durations per name, in integer ns as profilectl keeps them.
_TORCH_AGG = """
def add(out, e):
    if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") == "kernel" and "dur" in e:
        s = out.setdefault(e.get("name", "?"), [0, 0]); s[0] += 1; s[1] += round(float(e["dur"]) * 1000)
"""
IJSON = _TORCH_AGG + """
import ijson, json, sys
out = {}
with open(sys.argv[1], "rb") as fh:
    for e in ijson.items(fh, "traceEvents.item", use_float=True):
        add(out, e)
json.dump(out, open(sys.argv[2], "w"))
"""
ORJSON = _TORCH_AGG + """
import orjson, json, sys
out = {}
for e in orjson.loads(open(sys.argv[1], "rb").read())["traceEvents"]:
    add(out, e)
json.dump(out, open(sys.argv[2], "w"))
"""
# What one would write by hand with msgspec: 16 MB chunks cut at the last `},{` of each block, decoded
# into a Struct of the 4 fields this sum needs, one Python pass over the events. The .json.gz through
# the stdlib's gzip, as such a script would. profilectl's target: within 1.2x of it (issue 26).
STRAIGHT_MSGSPEC = """
import gzip, json, re, sys
import msgspec

class E(msgspec.Struct, gc=False):
    ph: str | None = None
    cat: str | None = None
    name: str = "?"
    dur: float | None = None

class Doc(msgspec.Struct, gc=False):
    traceEvents: list[E]

events, doc, cut = msgspec.json.Decoder(list[E]), msgspec.json.Decoder(Doc), re.compile(rb"\\}\\s*,\\s*\\{")
out = {}

def add(items):
    for e in items:
        if e.ph == "X" and e.cat == "kernel" and e.dur is not None:
            s = out.get(e.name)
            if s is None:
                out[e.name] = [1, round(e.dur * 1000)]
            else:
                s[0] += 1
                s[1] += round(e.dur * 1000)

with (gzip.open if sys.argv[1].endswith(".gz") else open)(sys.argv[1], "rb") as fh:
    buf = fh.read(16 << 20)
    buf = buf[re.search(rb'"traceEvents"\\s*:\\s*\\[', buf).end():]
    while more := fh.read(16 << 20):
        buf += more
        last = None
        for last in cut.finditer(buf, max(0, len(buf) - (1 << 20))):
            pass
        add(events.decode(b"[" + buf[:last.start() + 1] + b"]"))
        buf = buf[last.end() - 1:]
    add(doc.decode(b'{"traceEvents": [' + buf).traceEvents)
json.dump(out, open(sys.argv[2], "w"))
"""
STDLIB_JSON = _TORCH_AGG + """
import json, sys
out = {}
for e in json.load(open(sys.argv[1], "rb"))["traceEvents"]:
    add(out, e)
json.dump(out, open(sys.argv[2], "w"))
"""
JSON_PANDAS = """
import json, pandas as pd, sys
df = pd.DataFrame(json.load(open(sys.argv[1], "rb"))["traceEvents"])
k = df[(df.ph == "X") & (df.cat == "kernel")]
print(len(k.groupby("name")["dur"].agg(["count", "sum"])))
"""
ORJSON_PANDAS = JSON_PANDAS.replace("import json,", "import orjson,").replace(
    'json.load(open(sys.argv[1], "rb"))', 'orjson.loads(open(sys.argv[1], "rb").read())')
BYTE_SCAN = """
import sys
with open(sys.argv[1], "rb", buffering=0) as fh:
    buf = bytearray(1 << 24)
    while fh.readinto(buf):
        pass
"""
GZIP_SCAN = """
import gzip, sys
with gzip.open(sys.argv[1], "rb") as fh:
    while fh.read(1 << 24):
        pass
"""


def plain_install(workdir: Path) -> list[str]:
    """This checkout as a user gets it: `pip install` of it (no extras, not editable) into a venv of
    its own under workdir, refreshed every run; its console script is what is measured."""
    venv = workdir / "plain-install"
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([*pip, str(REPO)], check=True)
    else:  # the dependencies stay; the project is rebuilt from the checkout
        subprocess.run([*pip, "--no-deps", "--force-reinstall", str(REPO)], check=True)
    return [str(venv / "bin" / "profilectl")]


def measured_env(env: dict[str, str] | None) -> dict[str, str]:
    """Bytecode written and read as on a user's machine (a session's PYTHONDONTWRITEBYTECODE would
    make every import compile its source: 0.5 s more per command here)."""
    env = dict(os.environ if env is None else env)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def measure(argv: list[str], env: dict[str, str] | None = None, stdout: Path | None = None) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB of the process and its children) of one child process."""
    env = measured_env(env)
    out = open(stdout, "wb") if stdout else subprocess.DEVNULL
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if stdout:
        out.close()  # type: ignore[union-attr]
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(argv)}: {process.stderr.read().decode()[-600:]}")  # type: ignore[union-attr]
    return wall, usage.ru_maxrss / 1024


def python(script: str, *args: str) -> list[str]:
    return [sys.executable, "-c", script, *args]


def installed(module: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(module) is not None


def generate(data: Path, args: argparse.Namespace, wanted: set[str]) -> dict[str, Path]:
    """The inputs, generated once per size (reused by later runs of the bench)."""
    gen = [sys.executable, str(REPO / "bench" / "gen_trace.py")]
    paths = {**{f"csv-{n}": data / f"csv-{n}" for n in args.sizes},
             **{f"rocpd-{n}": data / f"rocpd-{n}" for n in args.sizes},
             "torch": data / f"torch-{args.events}", "ranks-csv": data / f"ranks-csv-{args.ranks}x{args.rank_dispatches}",
             "one-csv": data / f"one-csv-{args.ranks * args.rank_dispatches}",
             "ranks-rocpd": data / f"ranks-rocpd-{args.ranks}x{args.rank_dispatches}",
             "one-rocpd": data / f"one-rocpd-{args.ranks * args.rank_dispatches}"}
    jobs = {**{f"csv-{n}": ["--dispatches", str(n)] for n in args.sizes},
            **{f"rocpd-{n}": ["--dispatches", str(n), "--rocpd", "--no-csv"] for n in args.sizes},
            "torch": ["--chrome", str(args.events), "--gzip", "--no-csv", "--dispatches", "0"],
            "ranks-csv": ["--dispatches", str(args.ranks * args.rank_dispatches), "--ranks", str(args.ranks)],
            "ranks-rocpd": ["--dispatches", str(args.ranks * args.rank_dispatches), "--ranks", str(args.ranks),
                            "--rocpd", "--no-csv"],
            }
    needed = {**{k: k.split("-")[0] in wanted for k in paths}, "torch": "torch" in wanted,
              **{k: "ranks" in wanted for k in ("ranks-csv", "one-csv", "ranks-rocpd", "one-rocpd")}}
    for key, folder in paths.items():
        done = folder / ".complete"
        if needed[key] and not done.exists():
            if key in jobs:
                subprocess.run([*gen, str(folder), *jobs[key]], check=True)
            else:  # one file holding exactly the ranks' dispatches, so the two readings must agree
                join(sorted(paths[key.replace("one", "ranks")].rglob("*_kernel_trace.csv" if key == "one-csv"
                                                                     else "*_results.db")), folder, key)
            done.touch()
    return paths


def join(parts: list[Path], folder: Path, key: str) -> None:
    (folder / "bench-host").mkdir(parents=True, exist_ok=True)
    if key == "one-csv":
        with open(folder / "bench-host" / "834304_kernel_trace.csv", "wb") as out:
            for index, part in enumerate(parts):
                with open(part, "rb") as fh:
                    header = fh.readline()
                    if index == 0:
                        out.write(header)
                    while block := fh.read(1 << 24):
                        out.write(block)
        return
    # one process's database holding every rank's dispatches, written as rocprofv3 writes one
    import sqlite3
    sys.path.insert(0, str(REPO / "tests"))
    from rocpd_writer import RocpdWriter
    target = RocpdWriter(folder / "bench-host" / "834304_results.db", pid=834304, fast=True)
    for part in parts:
        source = sqlite3.connect(f"file:{part}?mode=ro", uri=True)
        rows = source.execute('SELECT S.display_name, K.start, K."end" FROM rocpd_kernel_dispatch K '
                              "JOIN rocpd_info_kernel_symbol S ON S.id = K.kernel_id AND S.guid = K.guid ORDER BY K.id")
        while batch := rows.fetchmany(500_000):
            first = target.correlation
            target.correlation += len(batch)
            target.dispatches([(name, a, b, first + i + 1) for i, (name, a, b) in enumerate(batch)], tid=834304)
        source.close()
    target.close()


def warm(folder: Path) -> None:
    """Page cache warm for every tool alike."""
    for path in folder.rglob("*"):
        if path.is_file():
            with open(path, "rb") as fh:
                while fh.read(1 << 24):
                    pass


def kernels_of_report(path: Path) -> dict[str, tuple[int, int]]:
    return {k["name"]: (k["calls"], round(k["total_ns"])) for k in json.loads(path.read_text())["kernels"]}


def kernels_of_reference(path: Path) -> dict[str, tuple[int, int]]:
    return {name: (int(n), round(total)) for name, (n, total) in json.loads(path.read_text()).items()}


MEMORY_BUDGET_MIB = 512
# Peers that compute the same table in one tool call (not the byte scans, not profilectl's cache)
PEER_WORDS = ("polars", "duckdb", "sqlite3, rocpd", "straight msgspec", "ijson", "orjson")


def targets(medians: dict[tuple[str, str], tuple[float, float]]) -> list[str]:
    """Issue 26's targets, each as met or missed with its figures: CSV <= 1.0x polars, every other
    reader <= 1.2x its best peer, peak memory <= 512 MiB, N ranks' files <= 1.5x one file of them all."""
    out = []
    sections = dict.fromkeys(section for section, _ in medians)
    for section in sections:
        rows = {label: figures for (s, label), figures in medians.items() if s == section}
        if section.startswith("ranks"):
            one, many = (next(f for label, f in rows.items() if word in label) for word in (" one ", " files of "))
            out.append(f"{'met ' if many[0] <= 1.5 * one[0] else 'MISSED'} {section}: several files {many[0] / one[0]:.2f}x "
                       "one file of them all (target <= 1.5x)")
            out += [f"{'met ' if rss <= MEMORY_BUDGET_MIB else 'MISSED'} {section}: {label} peak {rss:.0f} MiB "
                    f"(target <= {MEMORY_BUDGET_MIB} MiB)" for label, (_, rss) in rows.items()]
        if section == "start":
            for word, limit in (("env-check", 0.15), ("finished run", 0.1), ("cached bare", 0.1)):
                found = next(((label, f) for label, f in rows.items() if word in label), None)
                if found:
                    out.append(f"{'met ' if found[1][0] <= limit else 'MISSED'} start: {found[0]} {found[1][0]:.3f} s "
                               f"(target <= {limit} s)")
        for kind in (".json.gz", ".json") if section == "torch" else ("",):
            ours = next((f for label, f in rows.items() if label.startswith("profilectl first ingest")
                         and (not kind or label.endswith(f"({kind})"))), None)
            if ours is None:
                continue
            peers = {label: f for label, f in rows.items() if label.startswith(PEER_WORDS)
                     and (".gz" in label) == (kind == ".json.gz")}
            if section.startswith("csv"):
                peers = {label: f for label, f in peers.items() if label.startswith("polars")}
            limit = 1.0 if section.startswith("csv") else 1.2
            if peers:
                label, best = min(peers.items(), key=lambda item: item[1][0])
                out.append(f"{'met ' if ours[0] <= limit * best[0] else 'MISSED'} {section} {kind}: profilectl "
                           f"{ours[0]:.2f} s = {ours[0] / best[0]:.2f}x {label} ({best[0]:.2f} s; target <= {limit}x)")
            out.append(f"{'met ' if ours[1] <= MEMORY_BUDGET_MIB else 'MISSED'} {section} {kind}: profilectl peak "
                       f"{ours[1]:.0f} MiB (target <= {MEMORY_BUDGET_MIB} MiB)")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dispatches", default="1000000,10000000",
                        help="comma list: one csv and one rocpd section per size")
    parser.add_argument("--from-checkout", action="store_true",
                        help="measure this checkout's tools/profilectl instead of a plain `pip install` of it")
    parser.add_argument("--events", type=int, default=2_000_000, help="events of the torch Chrome trace")
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--rank-dispatches", type=int, default=1_000_000)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "profilectl-bench")
    parser.add_argument("--only", default="csv,rocpd,torch,ranks,start")
    parser.add_argument("--skip", default="", help="comma list of: pandas, pyarrow, duckdb, json, ijson, orjson")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; each figure is the median")
    args = parser.parse_args()
    args.sizes = [int(n) for n in args.dispatches.split(",") if n]
    wanted = set(filter(None, args.only.split(",")))
    skip = set(filter(None, args.skip.split(",")))
    paths = generate(args.workdir, args, wanted)
    global PROFILECTL
    if not args.from_checkout:
        PROFILECTL = plain_install(args.workdir)
    print(f"machine: {platform.node()}, {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, "
          f"{platform.platform()}")
    for key, folder in paths.items():
        if folder.exists():
            size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))
            print(f"  {key}: {size / 2**30:.2f} GiB in {folder}")

    print(f"  profilectl: {' '.join(PROFILECTL)}")
    trace, trace_gz = paths["torch"] / "torch_trace.json", paths["torch"] / "torch_trace.json.gz"
    rounds: dict[tuple[str, str], list[tuple[float, float]]] = {}
    checks: list[str] = []
    work = Path(tempfile.mkdtemp(prefix="profilectl-bench-"))
    gz_dir = work / "gz"
    if "torch" in wanted:
        gz_dir.mkdir()
        (gz_dir / "torch_trace.json.gz").symlink_to(trace_gz)
        json_dir = work / "json"
        json_dir.mkdir()
        (json_dir / "torch_trace.json").symlink_to(trace)

    def record(section: str, label: str, figures: tuple[float, float]) -> None:
        rounds.setdefault((section, label), []).append(figures)

    def report(path: Path, cache: Path, out: Path | None = None) -> tuple[float, float]:
        env = dict(os.environ, PROFILECTL_CACHE_DIR=str(cache))
        return measure([*PROFILECTL, "report", str(path), "--format", "json"], env, out)

    # a finished run (a real one: `profile` of a trivial program), for the fixed cost of `report`
    subprocess.run([*PROFILECTL, "profile", "--repeat", "2", "--warmup", "0", "--traces-dir", str(work / "traces"),
                    "--json", "--", sys.executable, "-c", "pass"], capture_output=True, check=True,
                   env=dict(os.environ, PROFILECTL_CACHE_DIR=str(work / "seed")))
    run = next((work / "traces").glob("*-profile-*"))
    tiny = work / "tiny"
    (tiny / "h").mkdir(parents=True)
    (tiny / "h" / "1_kernel_trace.csv").write_text(
        (REPO / "tests/fixtures/rocprofv3-docs/kernel_trace.csv").read_text())
    # the warm state the fixed-cost targets are about: a bare folder's first report is never kept (it
    # says "not cached"), its second is; env-check's answers are kept per tool file
    for _ in range(2):
        subprocess.run([*PROFILECTL, "report", str(tiny), "--format", "json"], capture_output=True, check=True,
                       env=measured_env(dict(os.environ, PROFILECTL_CACHE_DIR=str(work / "seed"))))
    subprocess.run([*PROFILECTL, "env-check", "--json"], capture_output=True, env=measured_env(None))
    subprocess.run([*PROFILECTL, "report", str(run), "--format", "json"], capture_output=True, check=True,
                   env=measured_env(dict(os.environ, PROFILECTL_CACHE_DIR=str(work / "seed"))))

    for round_number in range(args.repeat):
        first = round_number == 0
        cache = work / f"cache{round_number}"  # cold: every first ingest reads the files
        for size in args.sizes:
            name = f"{size / 1e6:g} M"
            csv_dir, db_dir = paths[f"csv-{size}"], paths[f"rocpd-{size}"]
            csv_file = next(iter(sorted(csv_dir.rglob("*_kernel_trace.csv"))), None)
            db_file = next(iter(sorted(db_dir.rglob("*_results.db"))), None)
            if "csv" in wanted and csv_file:
                section = f"csv {name}"
                warm(csv_dir)  # the section's input in the page cache for every tool alike
                out = work / f"csv-{size}-profilectl.json"
                record(section, "profilectl first ingest (timeline on)", report(csv_dir, cache, out))
                ref = work / f"csv-{size}-polars.json"
                record(section, "polars streaming group-by", measure(python(POLARS, str(csv_file), str(ref))))
                if first:
                    checks.append(f"{section}: profilectl == polars for every kernel's calls and total: "
                                  f"{kernels_of_report(out) == kernels_of_reference(ref)}")
                record(section, "profilectl re-report (cached)", report(csv_dir, cache))
                if "duckdb" not in skip and installed("duckdb"):
                    record(section, "duckdb read_csv group-by (256 MB limit)", measure(python(DUCKDB, str(csv_file))))
                record(section, "byte scan", measure(python(BYTE_SCAN, str(csv_file))))
                if first and "pyarrow" not in skip and installed("pyarrow"):
                    record(section, "pyarrow read_csv + group_by (1 run)", measure(python(PYARROW, str(csv_file))))
                if first and "pandas" not in skip and installed("pandas"):
                    record(section, "pandas read_csv + groupby (1 run)", measure(python(PANDAS, str(csv_file))))
            if "rocpd" in wanted and db_file:
                section = f"rocpd {name}"
                warm(db_dir)
                out = work / f"rocpd-{size}-profilectl.json"
                record(section, "profilectl first ingest (timeline on)", report(db_dir, cache, out))
                ref = work / f"rocpd-{size}-sqlite.json"
                record(section, "sqlite3, rocpd's view SQL (group by name)",
                       measure(python(ROCPD_VIEW_SQL, str(db_file), str(ref))))
                if first:
                    checks.append(f"{section}: profilectl == SQLite view SQL for every kernel's calls and total: "
                                  f"{kernels_of_report(out) == kernels_of_reference(ref)}")
                if PROFILECTL is CHECKOUT:  # a plain install has no connectorx: its route is already sqlite3
                    measured = measure([*PROFILECTL, "report", str(db_dir), "--format", "json"],
                                       dict(os.environ, PROFILECTL_CACHE_DIR=str(work / f"noarrow{round_number}-{size}"),
                                            PROFILECTL_NO_ARROW="1"))
                    record(section, "profilectl, sqlite3 route (PROFILECTL_NO_ARROW=1)", measured)
                record(section, "byte scan", measure(python(BYTE_SCAN, str(db_file))))
        if "torch" in wanted:
            warm(paths["torch"])
            out = work / "torch-profilectl.json"
            record("torch", "profilectl first ingest (.json)", report(work / "json", cache, out))
            record("torch", "profilectl first ingest (.json.gz)", report(gz_dir, cache, work / "torch-gz.json"))
            ref = work / "torch-ijson.json"
            straight = work / "torch-straight.json"
            if installed("msgspec"):
                record("torch", "straight msgspec chunk reader (.json)", measure(python(STRAIGHT_MSGSPEC, str(trace), str(straight))))
                record("torch", "straight msgspec chunk reader (.json.gz, gzip)",
                       measure(python(STRAIGHT_MSGSPEC, str(trace_gz), str(work / "torch-straight-gz.json"))))
            if "ijson" not in skip and installed("ijson"):
                record("torch", "ijson streaming (yajl2_c)", measure(python(IJSON, str(trace), str(ref))))
            if "orjson" not in skip and installed("orjson"):
                record("torch", "orjson whole file", measure(python(ORJSON, str(trace), str(work / "torch-orjson.json"))))
                ref = work / "torch-orjson.json"
            if first and "json" not in skip:
                record("torch", "json (stdlib) whole file (1 run)",
                       measure(python(STDLIB_JSON, str(trace), str(work / "torch-json.json"))))
                if "pandas" not in skip and installed("pandas"):
                    record("torch", "json + pandas (1 run)", measure(python(JSON_PANDAS, str(trace))))
                    if installed("orjson"):
                        record("torch", "orjson + pandas (1 run)", measure(python(ORJSON_PANDAS, str(trace))))
            if first:  # the same reader without msgspec: the stdlib decoder in the same chunks
                record("torch", "profilectl reader, stdlib json path (1 run)", measure(python(
                    f"import sys; sys.path.insert(0, {str(REPO / 'src')!r}); from pathlib import Path; "
                    f"from profilectl.formats import torch_trace; torch_trace.read(Path(sys.argv[1]), fast=False)",
                    str(trace))))
            record("torch", "byte scan (.json)", measure(python(BYTE_SCAN, str(trace))))
            record("torch", "gunzip scan (.json.gz)", measure(python(GZIP_SCAN, str(trace_gz))))
            if installed("isal"):
                record("torch", "gunzip scan (.json.gz, isal)", measure(python(GZIP_SCAN.replace(
                    "import gzip,", "from isal import igzip as gzip; import"), str(trace_gz))))
            if first and ref.exists():
                same = kernels_of_report(out) == kernels_of_reference(ref) == kernels_of_report(work / "torch-gz.json")
                checks.append(f"torch: profilectl (.json and .json.gz) == {ref.stem.split('-')[1]} for every kernel's "
                              f"calls and total: {same}")
                if straight.exists():
                    checks.append(f"torch: the straight msgspec reader (.json) == {ref.stem.split('-')[1]}: "
                                  f"{kernels_of_reference(straight) == kernels_of_reference(ref)}")
        if "ranks" in wanted:
            for kind in ("csv", "rocpd"):
                warm(paths[f"one-{kind}"])
                warm(paths[f"ranks-{kind}"])
                one = work / f"one-{kind}.json"
                record(f"ranks {kind}", f"profilectl, one {kind} file of {args.ranks * args.rank_dispatches:,}",
                       report(paths[f"one-{kind}"], cache, one))
                many = work / f"ranks-{kind}.json"
                record(f"ranks {kind}", f"profilectl, {args.ranks} {kind} files of {args.rank_dispatches:,}",
                       report(paths[f"ranks-{kind}"], cache, many))
                if first:
                    checks.append(f"ranks {kind}: {args.ranks} files == one file for every kernel's calls and total: "
                                  f"{kernels_of_report(one) == kernels_of_report(many)}")
        if "start" in wanted:
            record("start", "python -c pass (interpreter alone)", measure([sys.executable, "-c", "pass"]))
            record("start", "profilectl env-check --json", measure([*PROFILECTL, "env-check", "--json"]))
            record("start", "profilectl report, finished run (json, kept render)", report(run, work / "seed"))
            record("start", "profilectl report, cached bare dir (json, kept render)", report(tiny, work / "seed"))

    print(f"\n{'section':<12} {'measurement (median of ' + str(args.repeat) + ' interleaved rounds)':<52} "
          f"{'wall s':>8} {'peak RSS MiB':>13} {'ratio':>7}")
    base: dict[str, float] = {}
    medians: dict[tuple[str, str], tuple[float, float]] = {}
    for (section, label), figures in rounds.items():
        wall = statistics.median(w for w, _ in figures)
        rss = max(r for _, r in figures)
        medians[(section, label)] = (wall, rss)
        base.setdefault(section, wall)
        print(f"{section:<12} {label:<52} {wall:>8.2f} {rss:>13.0f} {wall / base[section]:>7.2f}")
    print()
    for line in checks:
        print(line)
    print()
    for line in targets(medians):
        print(line)
    import shutil
    shutil.rmtree(work, ignore_errors=True)  # the bench's own scratch (caches, outputs), not the inputs
    return 0 if all(line.endswith("True") for line in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
