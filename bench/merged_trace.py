#!/usr/bin/env python3
"""The merged timeline of a generated multi-rank job: time, peak memory and size of
`profilectl merge-trace`, beside a naive merge that loads every rank's trace whole (json.load).

The job is written as the SLURM launcher lays it out (`<host>-rank<R>/manifest.json` and
`raw/<host>-rank<R>-<pid>.pt.trace.json.gz` in kineto's layout), each host's clock offset by a known
amount: ranks run steps of CPU operators, launches, kernels and flows, then an NCCL all-reduce
kernel that every rank enters when its compute is done and leaves when the last one has entered
(plus the transfer, and ±2 µs of jitter); one rank is a straggler. Tests build their jobs with
`write_job` too (tests/unit/test_merged_trace.py).

    bench/merged_trace.py [--ranks 64] [--hosts 8] [--steps 10] [--kernels 40] [--max-mb 100] [--keep DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MONOTONIC_US = 4_764_637_000_000.0  # where host 0's clock reads at the job's start (kineto: µs since boot)
EPOCH_NS = 1_795_621_000_000_000_000  # the job's start, wall clock
STEP_US = 20_000.0
TRANSFER_US = 300.0
KERNEL = ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, "
          "at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, at::native::AUnaryFunctor"
          "<float, float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul>)")
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def host_offsets_us(hosts: int, seed: int = 3) -> list[float]:
    """Each host's clock minus host 0's, µs: seconds apart, with a fraction (boot times differ)."""
    rng = random.Random(seed)
    return [0.0] + [round(rng.uniform(-5e6, 5e6), 3) for _ in range(hosts - 1)]


def manifest() -> dict[str, object]:
    return {"schema_version": 1, "profilectl_version": "0.1.0", "service": "trace", "backend": "torch",
            "reason": "generated", "fallbacks": [], "tool": None, "argv": ["python3", "train.py"], "phases": [],
            "workload": ["python3", "train.py"], "workload_source": "argument", "counter_set": None, "gpu": None,
            "started_at": "2026-11-25T00:00:00.000Z", "finished_at": "2026-11-25T00:01:00.000Z",
            "exit_code": 0, "status": "ok"}


def rank_events(rank: int, ranks: int, steps: int, kernels: int, clock_us: float, straggler: int | None,
                seed: int) -> list[dict[str, object]]:
    """One rank's events on its host's clock (true time + clock_us)."""
    rng = random.Random(seed * 1000 + rank)
    pid, tid, stream, comm = 1000 + rank, 1000 + rank, 7, 20
    events: list[dict[str, object]] = [
        {"name": "process_name", "ph": "M", "ts": clock_us, "pid": pid, "tid": 0, "args": {"name": "python"}},
        {"name": "process_labels", "ph": "M", "ts": clock_us, "pid": pid, "tid": 0, "args": {"labels": "CPU"}},
        {"name": "process_name", "ph": "M", "ts": clock_us, "pid": 0, "tid": 0, "args": {"name": "python"}},
        {"name": "process_labels", "ph": "M", "ts": clock_us, "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
        {"name": "thread_name", "ph": "M", "ts": clock_us, "pid": pid, "tid": tid,
         "args": {"name": f"thread {tid} (python)"}},
        {"name": "thread_name", "ph": "M", "ts": clock_us, "pid": 0, "tid": stream, "args": {"name": "stream 7"}},
        {"name": "thread_name", "ph": "M", "ts": clock_us, "pid": 0, "tid": comm, "args": {"name": "stream 20"}}]
    corr = 0
    all_rng = random.Random(seed)  # shared by all ranks: every rank sees the same arrivals of the others
    for step in range(steps):
        start = step * STEP_US
        arrivals = [start + STEP_US * 0.7 + all_rng.uniform(0, 200) + (2_000.0 if r == straggler else 0.0)
                    for r in range(ranks)]
        leave = max(arrivals) + TRANSFER_US
        t = start + rng.uniform(0, 20)
        gpu_t = t + 50
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": pid, "tid": tid,
                       "ts": round(clock_us + t, 3), "dur": round(STEP_US - 30, 3), "args": {"External id": step}})
        gpu_start = gpu_t
        for k in range(kernels):
            corr += 1
            op = rng.uniform(5, 40)
            launch = rng.uniform(3, op - 2)  # inside its operator: slices of one thread nest
            events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": pid, "tid": tid,
                           "ts": round(clock_us + t, 3), "dur": round(op, 3),
                           "args": {"External id": corr, "Sequence number": corr}})
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": tid,
                           "ts": round(clock_us + t + 1, 3), "dur": round(launch, 3),
                           "args": {"correlation": corr, "External id": corr}})
            duration = rng.uniform(2, 60)
            gpu_t = max(gpu_t, t + 5)
            events.append({"ph": "X", "cat": "kernel", "name": KERNEL, "pid": 0, "tid": stream,
                           "ts": round(clock_us + gpu_t, 3), "dur": round(duration, 3),
                           "args": {"correlation": corr, "stream": stream, "device": 0, "grid": [128, 1, 1]}})
            events.append({"ph": "s", "id": corr, "pid": pid, "tid": tid, "ts": round(clock_us + t + 1, 3),
                           "cat": "ac2g", "name": "ac2g"})
            events.append({"ph": "f", "id": corr, "pid": 0, "tid": stream, "ts": round(clock_us + gpu_t, 3),
                           "cat": "ac2g", "name": "ac2g", "bp": "e"})
            t += op + 2
            gpu_t += duration + 1
        arrive = arrivals[rank]
        corr += 1
        events.append({"ph": "X", "cat": "cpu_op", "name": "nccl:all_reduce", "pid": pid, "tid": tid,
                       "ts": round(clock_us + arrive - 40, 3), "dur": 12.0, "args": {"External id": corr}})
        events.append({"ph": "X", "cat": "kernel", "name": NCCL, "pid": 0, "tid": comm,
                       "ts": round(clock_us + arrive, 3), "dur": round(leave - arrive + rng.uniform(-2, 2), 3),
                       "args": {"correlation": corr, "stream": comm, "device": 0}})
        events.append({"ph": "X", "cat": "gpu_user_annotation", "name": f"ProfilerStep#{step}", "pid": 0,
                       "tid": stream, "ts": round(clock_us + gpu_start, 3), "dur": round(leave - gpu_start, 3),
                       "args": {"External id": step}})
    return events


def write_job(root: Path, ranks: int = 8, hosts: int = 2, steps: int = 10, kernels: int = 20,
              straggler: int | None = None, seed: int = 1, compress: bool = True,
              offsets_us: list[float] | None = None) -> tuple[Path, list[float]]:
    """A job folder of `ranks` torch traces over `hosts` hosts (rank r on host r * hosts // ranks),
    each host's clock offset by offsets_us[h] from host 0's; the folder and those offsets."""
    offsets = offsets_us if offsets_us is not None else host_offsets_us(hosts, seed)
    job = root / "20261125T000000Z-trace-job42.0"
    job.mkdir(parents=True)
    for rank in range(ranks):
        host = f"node{rank * hosts // ranks}"
        clock_us = MONOTONIC_US + offsets[rank * hosts // ranks]
        rank_dir = job / f"{host}-rank{rank}"
        (rank_dir / "raw").mkdir(parents=True)
        (rank_dir / "manifest.json").write_text(json.dumps(manifest()))
        document = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
                    "baseTimeNanoseconds": EPOCH_NS - int(clock_us * 1000),
                    "traceEvents": rank_events(rank, ranks, steps, kernels, clock_us, straggler, seed),
                    "traceName": f"{host}-rank{rank}-{1000 + rank}.pt.trace.json"}
        name = rank_dir / "raw" / f"{host}-rank{rank}-{1000 + rank}.pt.trace.json"
        text = json.dumps(document, indent=1).encode()
        if compress:
            name.with_name(name.name + ".gz").write_bytes(gzip.compress(text, 6))
        else:
            name.write_bytes(text)
    return job, offsets


ROCPROFV3_HEADER = ("Kind", "Agent_Id", "Queue_Id", "Stream_Id", "Thread_Id", "Dispatch_Id", "Kernel_Id", "Kernel_Name",
                    "Correlation_Id", "Start_Timestamp", "End_Timestamp")  # ROCm 7.0's first columns, read by name


def write_rocprofv3_folder(root: Path, ranks: int = 4, hosts: int = 2, steps: int = 6, kernels: int = 5,
                           straggler: int | None = None, seed: int = 1,
                           offsets_ns: list[int] | None = None) -> tuple[Path, list[int]]:
    """rocprofv3's per-process kernel traces of a multi-rank job (`<host>/rank<R>-<pid>_kernel_trace.csv`,
    profilectl's -o template under a launcher), ns timestamps on each host's clock; RCCL all-reduce
    kernels that every rank leaves together, as in write_job."""
    offsets = offsets_ns if offsets_ns is not None else [int(o * 1000) for o in host_offsets_us(hosts, seed)]
    folder = root / "rocprofv3"
    all_rng = random.Random(seed)
    rows: dict[int, list[str]] = {r: [] for r in range(ranks)}
    dispatch = 0
    for step in range(steps):
        start = int(step * STEP_US * 1000)
        arrivals = [start + int(STEP_US * 700) + all_rng.randrange(0, 200_000) + (3_000_000 if r == straggler else 0)
                    for r in range(ranks)]
        leave = max(arrivals) + int(TRANSFER_US * 1000)
        for rank in range(ranks):
            rng = random.Random(seed * 7919 + step * 131 + rank)
            clock = 1_550_151_853_000_000 + offsets[rank * hosts // ranks]
            t = start + 50_000
            for _ in range(kernels):
                dispatch += 1
                duration = rng.randrange(2_000, 60_000)
                rows[rank].append(f'"KERNEL_DISPATCH","Agent 4",1,1,{1000 + rank},{dispatch},10,"{KERNEL}",{dispatch},'
                                  f"{clock + t},{clock + t + duration}")
                t += duration + 1_000
            dispatch += 1
            end = leave + rng.randrange(-2_000, 2_000)
            rows[rank].append(f'"KERNEL_DISPATCH","Agent 4",2,2,{1000 + rank},{dispatch},11,"{NCCL}",{dispatch},'
                              f"{clock + arrivals[rank]},{clock + end}")
    for rank, lines in rows.items():
        host = f"node{rank * hosts // ranks}"
        (folder / host).mkdir(parents=True, exist_ok=True)
        header = ",".join(f'"{h}"' for h in ROCPROFV3_HEADER)
        (folder / host / f"rank{rank}-{1000 + rank}_kernel_trace.csv").write_text("\n".join([header, *lines]) + "\n")
    return folder, offsets


NAIVE = r"""
import json, gzip, sys, pathlib
job, out = pathlib.Path(sys.argv[1]), sys.argv[2]
docs = [json.load(gzip.open(f)) for f in sorted(job.glob("*/raw/*.json.gz"))]  # every rank whole, at once
merged = []
for rank, doc in enumerate(docs):
    for e in doc["traceEvents"]:
        e["pid"] = rank + 1
        merged.append(e)
json.dump({"traceEvents": merged}, open(out, "w"))
"""


MEASURE = ("import resource, subprocess, sys; code = subprocess.run(sys.argv[1:]).returncode; "
           "sys.stderr.write(f'maxrss {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}\\n'); sys.exit(code)")


def timed(argv: list[str]) -> tuple[float, float, int, str]:
    """Wall seconds, peak RSS (MB) of the command alone (a fresh parent measures each), its exit
    code and its stdout."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", MEASURE, *argv], capture_output=True, text=True)
    wall = time.perf_counter() - start
    peak = next((int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("maxrss ")), 0)
    return wall, peak / 1024, done.returncode, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--ranks", type=int, default=64, help="ranks in the generated job (default 64)")
    parser.add_argument("--hosts", type=int, default=8, help="hosts they run on (default 8)")
    parser.add_argument("--steps", type=int, default=10, help="ProfilerStep#N per rank (default 10)")
    parser.add_argument("--kernels", type=int, default=40, help="kernels per step per rank (default 40)")
    parser.add_argument("--window", default="2:8", help="--steps given to merge-trace (default 2:8)")
    parser.add_argument("--max-mb", default="100", help="--max-mb given to merge-trace (default 100)")
    parser.add_argument("--no-naive", action="store_true", help="skip the naive json.load merge")
    parser.add_argument("--keep", metavar="DIR", help="write the job and outputs there (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(args.keep) if args.keep else Path(scratch)
        start = time.perf_counter()
        job, offsets = write_job(root, args.ranks, args.hosts, args.steps, args.kernels, straggler=args.ranks - 1)
        size = sum(f.stat().st_size for f in job.rglob("*.json.gz"))
        print(f"job: {args.ranks} ranks on {args.hosts} hosts, {size / 1e6:.1f} MB of gzip traces "
              f"(generated in {time.perf_counter() - start:.1f} s); host offsets µs: {offsets}")
        ours = root / "merged.trace.json.gz"
        argv = [sys.executable, str(REPO / "tools/profilectl"), "merge-trace", str(job), "-o", str(ours),
                "--steps", args.window, "--max-mb", args.max_mb, "--force", "--json"]
        wall, peak, code, printed = timed(argv)
        detail = json.loads(printed) if code == 0 else {}
        print(f"merge-trace --steps {args.window}: {wall:.2f} s, peak RSS {peak:.0f} MB, exit {code}, "
              f"{detail.get('bytes_written', 0) / 1e6:.1f} MB JSON ({detail.get('file_bytes', 0) / 1e6:.1f} MB gz), "
              f"{detail.get('events_written', 0):,} events, {detail.get('cut')}")
        clock_host = int(detail["clock"].split()[0].removeprefix("node")) if detail else 0
        for o in detail.get("offsets", []):
            truth = offsets[clock_host] - offsets[int(o["host"].removeprefix("node"))]
            print(f"  offset {o['host']}: {o['offset_ns'] / 1e3:+.3f} µs, generated {truth:+.3f} µs: error "
                  f"{o['offset_ns'] / 1e3 - truth:+.3f} µs ({o['pairs']} pairs, spread {o['spread_ns'] / 1e3:.1f} µs)")
        if not args.no_naive:
            naive = root / "naive.json"
            wall, peak, code, _ = timed([sys.executable, "-c", NAIVE, str(job), str(naive)])
            print(f"naive json.load of every rank, no window, no alignment: {wall:.2f} s, peak RSS {peak:.0f} MB, "
                  f"exit {code}, {naive.stat().st_size / 1e6 if naive.exists() else 0:.1f} MB JSON")
    return 0


if __name__ == "__main__":
    sys.exit(main())
