#!/usr/bin/env python3
"""A SLURM job's report at scale: merging the ranks' partials against reading every rank's raw files.

Generates (once per size, into --workdir) a job folder of N ranks as `srun profilectl trace` leaves
it: `<host>-rank<R>/` with manifest.json and raw/ holding one small torch.profiler trace per rank
(bench/gen_trace.py's generator, a different seed per rank, 8 ranks per host), then each rank's
partial as the rank writes it when it ends (timed apart: on a cluster every node makes its own at
once). Then, interleaved (partials, raw, partials, raw ...), each in a child process with a cache
folder of its own (no cached summary or report):

    profilectl report JOB --format json          (from the partials)
    profilectl report JOB --format json --raw    (every rank's raw files)

and prints wall time and the child's peak memory (max RSS) side by side, and checks that both
reports hold the same numbers (everything but the time the job view was composed and the notes).
Targets (issue 24): at 1,024 ranks, from partials in <= 5 s and <= 512 MB on this machine.

--formats measures the partial's file format: the same rank's partial as JSON (what partials.py
writes: msgspec, or the standard library where msgspec is missing) and as MessagePack, and its
columnar part alone (the four name-statistics tables and the busy blocks) as Parquet and as Arrow
IPC through polars: size, write and read time per file.

    bench/cluster_scale.py [--ranks 8,64,1024] [--repeat 2] [--steps 4] [--workdir DIR] [--formats]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "bench")]
RANKS_PER_HOST = 8
EVENTS_PER_STEP = 40 * 28 + 1  # gen_trace.write_chrome: 40 layers of 28 events, and the step mark


def manifest() -> dict:
    return {"schema_version": 1, "profilectl_version": "bench", "service": "trace", "backend": "torch",
            "reason": "bench/cluster_scale.py", "fallbacks": [], "tool": None, "argv": [], "phases": [],
            "workload": ["python3", "train.py"], "workload_source": "argv", "counter_set": None, "gpu": None,
            "started_at": "2026-11-25T10:00:00Z", "finished_at": "2026-11-25T10:01:00Z", "wall_seconds": 60.0,
            "exit_code": 0, "status": "ok"}


def generate(job: Path, ranks: int, steps: int) -> None:
    """The job folder: every rank's manifest and raw trace."""
    import gen_trace
    job.mkdir(parents=True)
    for rank in range(ranks):
        rank_dir = job / f"node{rank // RANKS_PER_HOST + 1:04d}-rank{rank}"
        (rank_dir / "raw").mkdir(parents=True)
        (rank_dir / "manifest.json").write_text(json.dumps(manifest()))
        gen_trace.write_chrome(rank_dir / "raw" / f"node-rank{rank}-{1000 + rank}.pt.trace.json.gz",
                               steps * EVENTS_PER_STEP, seed=rank + 1, compress=True)


def make_partials(job: Path) -> float:
    """Every rank's partial, as each rank writes it when it ends where it ran; the seconds they took,
    all ranks added (on a cluster the nodes make theirs at once)."""
    from profilectl import jobs
    from profilectl.read import partials
    reduce_s = 0.0
    for rank in jobs.compose(job).ranks:
        partial = partials.make(job / rank.run / "raw", rank)
        partials.write(job / rank.run, partial)
        reduce_s += partial.seconds
    return reduce_s


def measure(argv: list[str]) -> tuple[float, float, str]:
    """(wall s, child max RSS MiB, stdout) of one report in a child process with a fresh cache."""
    with tempfile.TemporaryDirectory(prefix="cluster-scale-cache-") as cache:
        env = dict(os.environ, PROFILECTL_CACHE_DIR=cache, PYTHONPATH=str(REPO / "src"))
        started = time.perf_counter()
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - started
            proc.returncode = os.waitstatus_to_exitcode(status)
            out.seek(0), err.seek(0)
            text, problem = out.read().decode(), err.read().decode()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {problem.strip()[-500:]}")
    return wall, usage.ru_maxrss / 1024, text


def comparable(text: str) -> dict:
    data = json.loads(text)
    data["job"].pop("updated_at", None)
    data.pop("notes", None), data.pop("cache_hit", None)
    return data


def scale(sizes: list[int], repeat: int, steps: int, workdir: Path) -> int:
    rows = []
    failed = False
    for ranks in sizes:
        job = workdir / f"20261125T100000Z-trace-job{ranks}.0"
        from profilectl.read import partials
        if not (job / "traces.ready").is_file():
            shutil.rmtree(job, ignore_errors=True)
            started = time.perf_counter()
            generate(job, ranks, steps)
            (job / "traces.ready").write_text("")
            print(f"{ranks} ranks: generated in {time.perf_counter() - started:.1f} s "
                  f"({sum(f.stat().st_size for f in job.rglob('*.gz')) / 2**20:.1f} MiB of traces)", flush=True)
        ready = job / f"partials-{partials.FILE}-{partials.SCHEMA}.ready"  # remade when the format changes
        if not ready.is_file():
            for old in job.glob("*/partial.*"):
                old.unlink()
            ready.write_text(json.dumps({"reduce_s": make_partials(job)}))
        reduce_s = json.loads(ready.read_text())["reduce_s"]
        base = [sys.executable, "-m", "profilectl", "report", str(job), "--format", "json"]
        times: dict[str, list[tuple[float, float]]] = {"partials": [], "raw": []}
        outputs: dict[str, str] = {}
        for _ in range(repeat):  # interleaved: the load on this shared machine moves
            for way, argv in (("partials", base), ("raw", base + ["--raw"])):
                wall, rss, text = measure(argv)
                times[way].append((wall, rss))
                outputs[way] = text
        equal = comparable(outputs["partials"]) == comparable(outputs["raw"])
        failed = failed or not equal
        best = {way: (min(w for w, _ in runs), max(r for _, r in runs)) for way, runs in times.items()}
        rows.append((ranks, best["partials"], best["raw"], reduce_s, equal))
        print(f"{ranks} ranks: partials {best['partials'][0]:.2f} s {best['partials'][1]:.0f} MiB | raw "
              f"{best['raw'][0]:.2f} s {best['raw'][1]:.0f} MiB | equal: {equal}", flush=True)
    print(f"\nload average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; best of {repeat} per cell, "
          "peak RSS the largest\n")
    print("| ranks | from partials: wall | max RSS | raw read: wall | max RSS | speed-up | partials made (all ranks, "
          "sum) | numbers equal |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: |")
    for ranks, (pw, pr), (rw, rr), reduce_s, equal in rows:
        print(f"| {ranks:,} | {pw:.2f} s | {pr:.0f} MiB | {rw:.2f} s | {rr:.0f} MiB | {rw / pw:.1f}x | "
              f"{reduce_s:.1f} s | {'yes' if equal else 'NO'} |")
    largest = rows[-1]
    if largest[0] >= 1024:
        ok = largest[1][0] <= 5.0 and largest[1][1] <= 512
        print(f"\ntarget at {largest[0]:,} ranks (<= 5 s, <= 512 MB from partials): {'met' if ok else 'MISSED'}")
    return 1 if failed else 0


def formats(workdir: Path, files: int) -> int:
    """The partial's format, by measurement: JSON (msgspec; the standard library where msgspec is not
    installed) against MessagePack (msgspec), Parquet and Arrow IPC (polars)."""
    import dataclasses

    import msgspec
    import polars as pl

    from profilectl.read import partials
    source = next(workdir.glob("*-trace-job*/*-rank0/" + partials.FILE), None)
    if source is None:
        raise SystemExit(f"no partial under {workdir}: run the scaling first (--ranks 8)")
    partial = partials.decode(source.read_bytes())
    schema = {"name": pl.Utf8, "calls": pl.Int64, "total": pl.Float64, "mean": pl.Float64, "m2": pl.Float64,
              "minimum": pl.Float64, "maximum": pl.Float64, "spread_known": pl.Boolean, "self_total": pl.Float64}

    def frames() -> dict[str, pl.DataFrame]:
        out = {table: pl.DataFrame({k: list(v) for k, v in dataclasses.asdict(getattr(partial, table)).items()},
                                   schema=schema)
               for table in ("kernels", "api", "memory_copies", "operators")}
        blocks = partial.rank_reductions()[0].piece.blocks if partial.reductions else ([], [])
        out["blocks"] = pl.DataFrame({"start": blocks[0], "end": blocks[1]})
        return out

    def stdlib_json(p: partials.Partial) -> bytes:
        return json.dumps(dataclasses.asdict(p), allow_nan=False, separators=(",", ":")).encode()

    ways = [("JSON (msgspec), whole partial [chosen]", "json", partials.encode,
             lambda data: partials.decode(data).tables()),
            ("JSON (standard library), whole partial", "json", stdlib_json,
             lambda data: partials._decode_stdlib(data, "bench").tables()),
            ("MessagePack (msgspec), whole partial", "msgpack", msgspec.msgpack.encode,
             lambda data: msgspec.msgpack.decode(data, type=partials.Partial).tables())]
    results = []
    with tempfile.TemporaryDirectory(prefix="partial-formats-") as tmp:
        folder = Path(tmp)
        for kind, suffix, encode, decode in ways:
            started = time.perf_counter()
            for i in range(files):
                (folder / f"{i}.{suffix}").write_bytes(encode(partial))
            write_s = time.perf_counter() - started
            started = time.perf_counter()
            for i in range(files):
                decode((folder / f"{i}.{suffix}").read_bytes())
            results.append((kind, (folder / f"0.{suffix}").stat().st_size, write_s, time.perf_counter() - started))
        for kind, suffix in (("Parquet (polars), the 4 tables and busy blocks only", "parquet"),
                             ("Arrow IPC (polars), the 4 tables and busy blocks only", "arrow")):
            started = time.perf_counter()
            for i in range(files):
                for name, frame in frames().items():
                    target = folder / f"{i}.{name}.{suffix}"
                    frame.write_parquet(target) if suffix == "parquet" else frame.write_ipc(target)
            write_s = time.perf_counter() - started
            started = time.perf_counter()
            for i in range(files):
                for name in ("kernels", "api", "memory_copies", "operators", "blocks"):
                    target = folder / f"{i}.{name}.{suffix}"
                    frame = pl.read_parquet(target) if suffix == "parquet" else pl.read_ipc(target)
                    frame.to_dict(as_series=False)
            read_s = time.perf_counter() - started
            size = sum(p.stat().st_size for p in folder.glob(f"0.*.{suffix}"))
            results.append((kind, size, write_s, read_s))
    blocks = sum(len(base64.b64decode(r.piece.block_start)) // 8 for r in partial.reductions)
    print(f"one rank's partial ({len(partial.kernels.name)} kernels, {len(partial.operators.name)} operators, "
          f"{blocks} busy blocks), {files} files each; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print("| format | bytes per rank | write per file | read per file |")
    print("| --- | ---: | ---: | ---: |")
    for kind, size, write_s, read_s in results:
        print(f"| {kind} | {size:,} | {1e3 * write_s / files:.2f} ms | {1e3 * read_s / files:.2f} ms |")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="8,64,1024", help="job sizes, comma-separated (default 8,64,1024)")
    parser.add_argument("--repeat", type=int, default=2, help="interleaved runs of each way per size (default 2)")
    parser.add_argument("--steps", type=int, default=4, help="profiler steps per rank's trace (default 4)")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "profilectl-cluster-scale",
                        help="where the generated jobs are kept between runs (default: $TMPDIR/profilectl-cluster-scale)")
    parser.add_argument("--formats", action="store_true",
                        help="measure the partial's file format instead (JSON vs MessagePack vs Parquet vs Arrow IPC)")
    parser.add_argument("--files", type=int, default=200, help="with --formats: files written and read per format")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    if args.formats:
        return formats(args.workdir, args.files)
    return scale([int(n) for n in args.ranks.split(",") if n], args.repeat, args.steps, args.workdir)


if __name__ == "__main__":
    sys.exit(main())
