#!/usr/bin/env python3
"""Reading at scale: 10 million dispatches as rocprofv3 CSV (ROCm 7.0 layout) and as rocpd.

In one run, each measurement in its own process (wall time and that process's peak RSS, from
wait4): profilectl's first ingest of the bare output directory, profilectl's re-report of the same
directory (summary cache) and of a finished run (stored summary.json), a polars streaming group-by
of the same file (the reference the first ingest must not be slower than), DuckDB's read_csv
group-by, and pandas read_csv + groupby as the baseline. Targets on a 2-core machine: first ingest
<= polars streaming, re-report < 0.5 s, peak RSS < 512 MB.

    python3 bench/ingest.py [--dispatches 10000000] [--workdir /tmp/profilectl-bench] [--skip pandas,duckdb]
                            [--repeat 3]

Each figure is the median of --repeat rounds; within a round the measurements run one after the
other, so slow spells of a shared machine hit every line alike.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROFILECTL = [sys.executable, str(REPO / "tools" / "profilectl")]

POLARS = """
import polars as pl, sys
d = pl.col("End_Timestamp") - pl.col("Start_Timestamp")
out = (pl.scan_csv(sys.argv[1]).group_by("Kernel_Name")
       .agg(pl.len(), d.sum().alias("t"), d.min().alias("lo"), d.max().alias("hi"), d.std().alias("s"))
       .collect(engine="streaming"))
print(out.height)
"""
DUCKDB = """
import duckdb, sys
con = duckdb.connect(); con.execute("SET memory_limit='256MB'")
d = "(End_Timestamp - Start_Timestamp)"
print(len(con.execute(f"SELECT Kernel_Name, count(*), sum({d}), min({d}), max({d}), stddev_pop({d}) "
                      "FROM read_csv(?) GROUP BY 1", [sys.argv[1]]).fetchall()))
"""
PANDAS = """
import pandas as pd, sys
df = pd.read_csv(sys.argv[1])
df["d"] = df.End_Timestamp - df.Start_Timestamp
print(len(df.groupby("Kernel_Name")["d"].agg(["count", "sum", "min", "max", "std"])))
"""


def measure(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of one child process."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(argv)}: {process.stderr.read().decode()[-400:]}")
    return wall, usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dispatches", type=int, default=10_000_000)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "profilectl-bench")
    parser.add_argument("--skip", default="", help="comma list of: pandas, duckdb, polars")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; each figure is the median")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    data = args.workdir / f"{args.dispatches}"
    csv_dir, host = data / "csv", "bench-host"
    trace = csv_dir / host / "834304_kernel_trace.csv"
    rocpd_dir = data / "rocpd"
    if not trace.exists() or not (rocpd_dir / "834304_results.db").exists():
        subprocess.run([sys.executable, str(REPO / "bench/gen_trace.py"), str(data / "gen"), "--dispatches",
                        str(args.dispatches), "--rocpd"], check=True)
        (csv_dir / host).mkdir(parents=True, exist_ok=True)
        rocpd_dir.mkdir(parents=True, exist_ok=True)
        shutil.move(str(data / "gen" / host / "834304_kernel_trace.csv"), trace)
        shutil.move(str(data / "gen" / host / "834304_results.db"), rocpd_dir / "834304_results.db")
    print(f"{args.dispatches:,} dispatches: kernel_trace.csv {trace.stat().st_size / 2**30:.2f} GiB, "
          f"results.db {(rocpd_dir / '834304_results.db').stat().st_size / 2**30:.2f} GiB; {os.cpu_count()} cores")

    # Every measurement reads the same files: warm the page cache first so none pays the disk alone.
    for path in (trace, rocpd_dir / "834304_results.db"):
        with open(path, "rb") as fh:
            while fh.read(1 << 24):
                pass
    rounds: dict[str, list[tuple[float, float]]] = {}

    def record(label: str, figures: tuple[float, float]) -> None:
        rounds.setdefault(label, []).append(figures)

    with tempfile.TemporaryDirectory() as tmp:
        # A finished run: what `profilectl trace` leaves (manifest.json + summary.json).
        run = Path(tmp) / "20261121T000000Z-trace-bench00"
        run.mkdir()
        summary = subprocess.run(PROFILECTL + ["report", str(csv_dir), "--format", "json"],
                                 env=dict(os.environ, PROFILECTL_CACHE_DIR=str(Path(tmp) / "seed")),
                                 capture_output=True, text=True, check=True).stdout
        (run / "summary.json").write_text(summary)
        (run / "manifest.json").write_text(json.dumps({"service": "trace", "backend": "rocprofv3", "status": "ok",
                                                       "reason": "bench", "fallbacks": [], "workload": ["bench"]}))
        for round_number in range(args.repeat):
            env = dict(os.environ, PROFILECTL_CACHE_DIR=str(Path(tmp) / f"cache{round_number}"))  # cold cache

            def report(path: Path) -> list[str]:
                return PROFILECTL + ["report", str(path), "--format", "json", "-o", os.devnull]

            record("profilectl first ingest (CSV)", measure(report(csv_dir), env))
            if "polars" not in skip:
                record("polars streaming group-by (reference)", measure([sys.executable, "-c", POLARS, str(trace)]))
            record("profilectl re-report, bare dir (CSV)", measure(report(csv_dir), env))
            record("profilectl re-report, finished run", measure(report(run), env))
            record("profilectl first ingest (rocpd)", measure(report(rocpd_dir), env))
            record("profilectl re-report, bare dir (rocpd)", measure(report(rocpd_dir), env))
            if "duckdb" not in skip:
                record("duckdb read_csv group-by", measure([sys.executable, "-c", DUCKDB, str(trace)]))
    if "pandas" not in skip:  # once: it takes ~30 s and ~8 GB
        record("pandas read_csv + groupby (baseline, 1 run)", measure([sys.executable, "-c", PANDAS, str(trace)]))
    results = [(label, statistics.median(w for w, _ in figures), max(r for _, r in figures))
               for label, figures in rounds.items()]
    print(f"{'measurement (median of ' + str(args.repeat) + ' rounds)':<44} {'wall s':>8} {'peak RSS MiB':>13}")
    for name, wall, rss in results:
        print(f"{name:<44} {wall:>8.2f} {rss:>13.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
