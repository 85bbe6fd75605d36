#!/usr/bin/env python3
"""Issue 38's reading targets in one command: profilectl beside the alternative each target names.

Every target is a ratio of two processes' figures on this machine, never an absolute time:
- csv same work:  `report` of a rocprofv3 kernel-trace CSV <= 1.0x a polars query doing the same work
                  (the kernel table: per-name calls/total/mean/min/max, and the busy/idle union of the
                  kernel intervals per device), at every --sizes size;
- csv group-by:   `report` <= 1.5x polars' bare streaming group-by at the largest size;
- peak memory:    `report` <= 512 MiB peak RSS at every size and for --ranks files of --rank-dispatches;
- torch .json.gz: `report` <= 1.2x a straight msgspec reader of the same file (decode the events, sum
                  kernel durations per name; bench/ingest.py's STRAIGHT_MSGSPEC);
- cold start:     `report` of a --cold-dispatches CSV with an empty cache <= 2x the bare group-by.

Inputs are made once with bench/gen_trace.py into --workdir (a temp folder, kept between runs).
Each side runs in its own process, one after the other within a round, rounds interleaved; wall
seconds are the median of --repeat rounds, a ratio the median of the rounds' own ratios (the two
sides of a round run back to back: a shared machine that slows for a while moves both), peak RSS
the largest of them (the child's own rusage,
from wait4: resource.struct_rusage of that child alone). Every `report` gets an empty cache folder,
so it reads the file. The answers are checked: each kernel's calls and total, and the busy/idle
union, from profilectl equal the polars query's (CSV), and the kernel sums equal the msgspec
reader's (torch). Exit 1 when a ratio is over its bound or a check fails.

    bench/targets.py [--sizes 1000000,10000000] [--ranks 8] [--rank-dispatches 1000000]
                     [--events 2000000] [--cold-dispatches 400000] [--repeat 3] [--smoke]
                     [--only csv,ranks,torch,cold] [--loose FACTOR] [--workdir DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENV_PYTHON = REPO / ".venv" / "bin" / "python"


def _need_polars() -> None:
    """The peers need polars and msgspec: run again with the checkout's .venv where this interpreter
    has them not (as tools/profilectl does)."""
    import importlib.util
    if all(importlib.util.find_spec(m) for m in ("polars", "msgspec")):
        return
    if VENV_PYTHON.exists() and Path(sys.prefix).resolve() != (REPO / ".venv").resolve():
        os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), str(Path(__file__).resolve()), *sys.argv[1:]])
    raise SystemExit("bench/targets.py: needs polars and msgspec (pip install .[bench])")


if __name__ == "__main__":
    _need_polars()

sys.path.insert(0, str(REPO / "bench"))
from ingest import POLARS as BARE_GROUP_BY  # noqa: E402  (the peers the earlier benches measured)
from ingest import STRAIGHT_MSGSPEC  # noqa: E402

PROFILECTL = [sys.executable, str(REPO / "tools" / "profilectl")]

# The same work as `report`'s kernel table and its busy/idle figures, written as a polars user would:
# one scan, two queries collected together (polars shares the scan), the union of the kernel
# intervals per device by a running maximum of the ends. argv[1] the CSV, argv[2] the answers (JSON).
POLARS_SAME_WORK = """
import json, sys
import polars as pl
lf = pl.scan_csv(sys.argv[1])
start, end = pl.col("Start_Timestamp"), pl.col("End_Timestamp")
d = end - start
kernels = lf.group_by("Kernel_Name").agg(pl.len().alias("calls"), d.sum().alias("total"), d.mean().alias("mean"),
                                         d.min().alias("min"), d.max().alias("max"))
busy = (lf.select("Agent_Id", "Start_Timestamp", "End_Timestamp").sort("Agent_Id", "Start_Timestamp")
        .with_columns(end.cum_max().shift(1).over("Agent_Id").alias("reach"))
        .with_columns((start > pl.col("reach")).fill_null(True).cum_sum().over("Agent_Id").alias("run"))
        .group_by("Agent_Id", "run").agg(start.min(), end.max())
        .group_by("Agent_Id").agg((end - start).sum().alias("busy"), start.min().alias("first"), end.max().alias("last"))
        .with_columns((pl.col("last") - pl.col("first") - pl.col("busy")).alias("idle")))
kernels, busy = pl.collect_all([kernels, busy], engine="streaming")
json.dump({"kernels": {k: [n, t] for k, n, t in kernels.select("Kernel_Name", "calls", "total").iter_rows()},
           "busy": {a: [b, i] for a, b, i in busy.select("Agent_Id", "busy", "idle").iter_rows()}},
          open(sys.argv[2], "w"))
"""

MEMORY_BUDGET_MIB = 512
SMOKE = {"sizes": [200_000], "ranks": 2, "rank_dispatches": 100_000, "events": 100_000, "cold_dispatches": 200_000}


def measured_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Bytecode read and written as on a user's machine (a session's PYTHONDONTWRITEBYTECODE makes
    every import compile its source)."""
    env = {**os.environ, **(extra or {})}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def measure(argv: list[str], env: dict[str, str] | None = None, stdout: Path | None = None) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of one child process: its own rusage from wait4."""
    out = open(stdout, "wb") if stdout else subprocess.DEVNULL
    try:
        started = time.perf_counter()
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, env=measured_env() if env is None else env)
        stderr = process.stderr.read() if process.stderr else b""
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
    finally:
        if stdout:
            out.close()  # type: ignore[union-attr]
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"failed ({process.returncode}): {argv}: {stderr.decode(errors='replace')[-800:]}")
    return wall, usage.ru_maxrss / 1024


def python(script: str, *args: str) -> list[str]:
    return [sys.executable, "-c", script, *args]


def generate(workdir: Path, key: str, argv: list[str]) -> Path:
    """One input folder, made once (a `.complete` marker says it was finished)."""
    folder = workdir / key
    if not (folder / ".complete").exists():
        shutil.rmtree(folder, ignore_errors=True)
        subprocess.run([sys.executable, str(REPO / "bench" / "gen_trace.py"), str(folder), *argv], check=True,
                       stdout=subprocess.DEVNULL)
        (folder / ".complete").touch()
    return folder


def warm(folder: Path) -> None:
    """The input in the page cache for both sides alike."""
    for path in folder.rglob("*"):
        if path.is_file():
            with open(path, "rb") as fh:
                while fh.read(1 << 24):
                    pass


def csv_of(folder: Path) -> Path:
    return next(iter(sorted(folder.rglob("*_kernel_trace.csv"))))


def kernels_of_report(doc: dict) -> dict[str, tuple[int, int]]:
    return {k["name"]: (int(k["calls"]), round(k["total_ns"])) for k in doc["kernels"]}


def fmt_size(n: int) -> str:
    return f"{n / 1e6:g} M" if n >= 1_000_000 else f"{n / 1e3:g} k"


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.scratch = Path(tempfile.mkdtemp(prefix="profilectl-targets-"))
        self.rounds: dict[str, list[tuple[float, float]]] = {}
        self.checks: list[tuple[str, bool]] = []
        self.runs = 0

    def record(self, label: str, figures: tuple[float, float]) -> None:
        self.rounds.setdefault(label, []).append(figures)

    def report(self, folder: Path, out: Path | None = None) -> tuple[float, float]:
        """`report FOLDER --format json` with an empty cache folder: the file is read, nothing kept is used."""
        self.runs += 1
        cache = self.scratch / f"cache-{self.runs}"
        figures = measure([*PROFILECTL, "report", str(folder), "--format", "json"],
                          measured_env({"PROFILECTL_CACHE_DIR": str(cache)}), out)
        shutil.rmtree(cache, ignore_errors=True)
        return figures

    def median(self, label: str) -> tuple[float, float]:
        figures = self.rounds[label]
        return statistics.median(w for w, _ in figures), max(r for _, r in figures)


def run(args: argparse.Namespace) -> dict:
    wanted = set(filter(None, args.only.split(",")))
    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    inputs: dict[str, Path] = {}
    if "csv" in wanted:
        for n in args.sizes:
            inputs[f"csv-{n}"] = generate(work, f"csv-{n}", ["--dispatches", str(n)])
    if "cold" in wanted:
        n = args.cold_dispatches
        inputs[f"csv-{n}"] = generate(work, f"csv-{n}", ["--dispatches", str(n)])
    if "ranks" in wanted:
        key = f"ranks-{args.ranks}x{args.rank_dispatches}"
        inputs[key] = generate(work, key, ["--dispatches", str(args.ranks * args.rank_dispatches),
                                           "--ranks", str(args.ranks)])
    if "torch" in wanted:
        key = f"torch-{args.events}"
        inputs[key] = generate(work, key, ["--chrome", str(args.events), "--gzip", "--no-csv", "--dispatches", "0"])

    bench = Bench(args)
    try:
        gz_dir = bench.scratch / "gz"  # a folder holding only the .json.gz, so `report` reads that one
        if "torch" in wanted:
            gz_dir.mkdir()
            (gz_dir / "torch_trace.json.gz").symlink_to(inputs[f"torch-{args.events}"] / "torch_trace.json.gz")
        for number in range(args.repeat):
            first = number == 0
            for n in args.sizes if "csv" in wanted else []:
                folder = inputs[f"csv-{n}"]
                warm(folder)
                ours, theirs = bench.scratch / "ours.json", bench.scratch / "theirs.json"
                bench.record(f"csv {n} profilectl", bench.report(folder, ours))
                bench.record(f"csv {n} same", measure(python(POLARS_SAME_WORK, str(csv_of(folder)), str(theirs))))
                if n == max(args.sizes):
                    bench.record(f"csv {n} bare", measure(python(BARE_GROUP_BY, str(csv_of(folder)),
                                                                 str(bench.scratch / "bare.json"))))
                if first:
                    doc, ref = json.loads(ours.read_text()), json.loads(theirs.read_text())
                    same_kernels = kernels_of_report(doc) == {k: tuple(v) for k, v in ref["kernels"].items()}
                    merged = (doc.get("timeline") or {}).get("merged") or {}
                    busy = list(ref["busy"].values())
                    same_busy = len(busy) == 1 and [merged.get("busy_ns"), merged.get("idle_ns")] == busy[0]
                    bench.checks.append((f"csv {fmt_size(n)}: every kernel's calls and total equal polars'", same_kernels))
                    bench.checks.append((f"csv {fmt_size(n)}: busy and idle ns equal polars' interval union", same_busy))
            if "ranks" in wanted:
                folder = inputs[f"ranks-{args.ranks}x{args.rank_dispatches}"]
                warm(folder)
                bench.record("ranks profilectl", bench.report(folder))
            if "torch" in wanted:
                folder = inputs[f"torch-{args.events}"]
                warm(folder)
                ours, theirs = bench.scratch / "torch-ours.json", bench.scratch / "torch-theirs.json"
                bench.record("torch profilectl", bench.report(gz_dir, ours))
                bench.record("torch msgspec", measure(python(STRAIGHT_MSGSPEC, str(folder / "torch_trace.json.gz"),
                                                             str(theirs))))
                if first:
                    ref = {k: (int(n), round(t)) for k, (n, t) in json.loads(theirs.read_text()).items()}
                    bench.checks.append(("torch .json.gz: every kernel's calls and total equal the msgspec reader's",
                                         kernels_of_report(json.loads(ours.read_text())) == ref))
            if "cold" in wanted:
                folder = inputs[f"csv-{args.cold_dispatches}"]
                warm(folder)
                bench.record("cold profilectl", bench.report(folder))
                bench.record("cold bare", measure(python(BARE_GROUP_BY, str(csv_of(folder)),
                                                         str(bench.scratch / "cold-bare.json"))))
    finally:
        shutil.rmtree(bench.scratch, ignore_errors=True)

    rows: list[dict] = []

    def ratio_row(target: str, size: str, ours: str, theirs: str, alternative: str, bound: float) -> None:
        (a, _), (b, _) = bench.median(ours), bench.median(theirs)
        # the median of each round's own ratio: both sides of a round ran minutes apart at most, so a
        # machine that slows for a while (a shared host) moves both, where medians taken apart drift
        each = [x / y if y > 0 else math.inf for (x, _), (y, _) in zip(bench.rounds[ours], bench.rounds[theirs])]
        ratio = statistics.median(each)
        limit = bound * args.loose
        rows.append({"target": target, "size": size, "profilectl": a, "alternative": b, "alternative_name": alternative,
                     "unit": "s", "ratio": ratio, "round_ratios": each, "bound": limit, "pass": ratio <= limit})

    def memory_row(target: str, size: str, ours: str) -> None:
        _, rss = bench.median(ours)
        limit = MEMORY_BUDGET_MIB * args.loose
        rows.append({"target": target, "size": size, "profilectl": rss, "alternative": None, "alternative_name": None,
                     "unit": "MiB", "ratio": rss / MEMORY_BUDGET_MIB, "round_ratios": None, "bound": limit,
                     "pass": rss <= limit})

    for n in args.sizes if "csv" in wanted else []:
        ratio_row("csv: report / polars same work", fmt_size(n), f"csv {n} profilectl", f"csv {n} same",
                  "polars kernel table + busy/idle union", 1.0)
        if n == max(args.sizes):
            ratio_row("csv: report / polars bare group-by", fmt_size(n), f"csv {n} profilectl", f"csv {n} bare",
                      "polars streaming group-by", 1.5)
        memory_row("csv: report peak RSS", fmt_size(n), f"csv {n} profilectl")
    if "ranks" in wanted:
        memory_row("ranks: report peak RSS", f"{args.ranks} x {fmt_size(args.rank_dispatches)}", "ranks profilectl")
    if "torch" in wanted:
        ratio_row("torch .json.gz: report / msgspec reader", f"{fmt_size(args.events)} events", "torch profilectl",
                  "torch msgspec", "straight msgspec reader (gzip)", 1.2)
        memory_row("torch .json.gz: report peak RSS", f"{fmt_size(args.events)} events", "torch profilectl")
    if "cold" in wanted:
        ratio_row("cold start: report / bare group-by", fmt_size(args.cold_dispatches), "cold profilectl", "cold bare",
                  "polars streaming group-by", 2.0)
    load = os.getloadavg() if hasattr(os, "getloadavg") else (math.nan,) * 3
    return {"machine": f"{platform.node()}, {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}",
            "load_average": [round(x, 2) for x in load], "repeat": args.repeat, "loose": args.loose,
            "rows": rows, "checks": [{"check": c, "ok": ok} for c, ok in bench.checks],
            "passed": all(r["pass"] for r in rows) and all(ok for _, ok in bench.checks)}


def table(result: dict) -> str:
    def figure(value: float | None, unit: str) -> str:
        return "—" if value is None else f"{value:.2f} s" if unit == "s" else f"{value:.0f} MiB"

    head = ["target", "size", "profilectl", "alternative", "ratio", "bound", "result"]
    lines = [head]
    for r in result["rows"]:
        alternative = "—" if r["alternative"] is None else f"{figure(r['alternative'], r['unit'])} ({r['alternative_name']})"
        bound = f"<= {r['bound']:g}x" if r["unit"] == "s" else f"<= {r['bound']:g} MiB"
        lines.append([r["target"], r["size"], figure(r["profilectl"], r["unit"]), alternative,
                      f"{r['ratio']:.2f}" if r["unit"] == "s" else f"{r['ratio']:.2f} of 512",
                      bound, "pass" if r["pass"] else "FAIL"])
    out = ["| " + " | ".join(line) + " |" for line in lines]
    out.insert(1, "|" + "---|" * len(head))
    out.append("")
    out += [f"check: {c['check']}: {'ok' if c['ok'] else 'FAIL'}" for c in result["checks"]]
    out.append(f"machine: {result['machine']}; load average {' '.join(map(str, result['load_average']))}; "
               f"medians of {result['repeat']} rounds" + (f"; bounds x{result['loose']:g}" if result["loose"] != 1 else ""))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,10000000", help="comma list of CSV dispatch counts")
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--rank-dispatches", type=int, default=1_000_000)
    parser.add_argument("--events", type=int, default=2_000_000, help="events of the torch .json.gz")
    parser.add_argument("--cold-dispatches", type=int, default=400_000, help="the CSV of the cold-start target")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; each wall time is their median")
    parser.add_argument("--smoke", action="store_true",
                        help=f"small inputs for CI ({SMOKE}); sizes given beside it are ignored")
    parser.add_argument("--only", default="csv,ranks,torch,cold")
    parser.add_argument("--loose", type=float, default=1.0, help="multiply every bound by this (CI smoke)")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "profilectl-targets",
                        help="where the inputs are made and kept between runs")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    args = parser.parse_args(argv)
    args.sizes = [int(n) for n in args.sizes.split(",") if n]
    if args.smoke:
        for key, value in SMOKE.items():
            setattr(args, key, value)
    result = run(args)
    print(json.dumps(result, indent=1) if args.json else table(result))
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
