#!/usr/bin/env python3
"""Reading Nsight Systems exports at scale: profilectl's nsys reader beside plain SQL, interleaved.

Builds (once, into --workdir) a synthetic export from the real one in tests/fixtures/nsys/
(vectoradd-streams-2022.4.sqlite): its four kernels and their four launch calls repeated until
there are --kernels kernels (each copy shifted in time, its correlation ids new), then reads it:
- profilectl: the whole reader (tables by GROUP BY, timeline and NVTX columns), Arrow route on
  (connectorx where installed) and off (PROFILECTL_NO_ARROW=1);
- sql: the kernel table alone by one `SELECT name, count(*), sum(end - start) ... GROUP BY` joined
  with StringIds (what a hand-written script does; no timeline).
Each measurement is its own process (wall seconds, peak RSS through wait4); the rounds interleave
the three, medians of --repeat rounds are printed with ratios to `sql`. The kernel totals of the
reader and of the SQL are checked equal.

    python3 bench/nsys_ingest.py [--kernels 1000000] [--repeat 3] [--workdir /tmp/profilectl-nsys-bench]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests/fixtures/nsys/vectoradd-streams-2022.4.sqlite"
SHIFT_NS = 100_000  # each copy of the four kernels starts this much later than the one before

READER = """import json, sys
from pathlib import Path
from profilectl.formats.nsys_sqlite import NsysReader
tables = NsysReader().read([Path(sys.argv[1])])
print(json.dumps({name: [s.calls, int(s.total)] for name, s in tables.kernels.items()}))
"""
SQL = """import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute('SELECT s.value, count(*), sum(k."end" - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k '
                  'JOIN StringIds s ON s.id = k.demangledName GROUP BY k.demangledName').fetchall()
print(json.dumps({name: [n, total] for name, n, total in rows}))
"""


def build(path: Path, kernels: int) -> None:
    """The fixture with its kernels and their launch calls repeated to `kernels` kernels."""
    if path.exists():
        return
    shutil.copyfile(FIXTURE, path)
    db = sqlite3.connect(path)
    launched = [row[0] for row in db.execute("SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL")]
    copies = f"(WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < {kernels // 4 - 1}) " \
             "SELECT n FROM c)"
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"):
        columns = [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
        shifted = ", ".join(f'T."{c}" + n * {SHIFT_NS}' if c in ("start", "end") else "T.correlationId + n * 1000"
                            if c == "correlationId" else f'T."{c}"' for c in columns)
        names = ", ".join(f'"{c}"' for c in columns)
        db.execute(f"INSERT INTO {table} ({names}) SELECT {shifted} FROM {table} T, {copies} "
                   f"WHERE T.correlationId IN ({','.join('?' * len(launched))})", launched)
    db.commit()
    db.close()


def measure(code: str, path: Path, env: dict[str, str]) -> tuple[float, float, dict]:
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, env=env)
    out = process.stdout.read() if process.stdout else b""
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"a measurement failed (status {status})")
    return seconds, usage.ru_maxrss / 1024, json.loads(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", type=int, default=1_000_000, help="kernels in the synthetic export")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds; medians are printed")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/profilectl-nsys-bench"),
                        help="where the synthetic export is built (kept for the next run)")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    path = args.workdir / f"vectoradd-x{args.kernels}.sqlite"
    build(path, args.kernels)
    base = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    runs = {"profilectl": (READER, base), "profilectl (no Arrow)": (READER, dict(base, PROFILECTL_NO_ARROW="1")),
            "sql": (SQL, base)}
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    answers = {}
    for _ in range(args.repeat):
        for name, (code, env) in runs.items():
            seconds, rss, answer = measure(code, path, env)
            results[name].append((seconds, rss))
            answers[name] = answer
    assert len({json.dumps(a, sort_keys=True) for a in answers.values()}) == 1, answers
    load = os.getloadavg()[0]
    print(f"{args.kernels:,} kernels (+ their launch calls), {args.repeat} rounds, load average {load:.1f}")
    sql = statistics.median(s for s, _ in results["sql"])
    for name, values in results.items():
        seconds = statistics.median(s for s, _ in values)
        rss = statistics.median(r for _, r in values)
        print(f"  {name:24} {seconds:7.2f} s  x{seconds / sql:5.1f}  peak RSS {rss:7.0f} MB")
    print(f"  kernel totals agree: {answers['sql']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
