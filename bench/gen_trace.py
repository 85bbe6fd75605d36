#!/usr/bin/env python3
"""Generates a large rocprofv3 output for the reading benchmarks.

- kernel_trace.csv in the real ROCm 7.0 column layout (the header of rocprofiler-sdk's documented
  sample), N dispatches of a few thousand distinct kernels with long C++ template names and
  Zipf-like popularity;
- optionally a rocpd SQLite database of the same dispatches, with the tables the rocpd views
  (`kernels`, `top_kernels`) read: rocpd_string, rocpd_info_kernel_symbol, rocpd_kernel_dispatch.

    python3 bench/gen_trace.py OUT_DIR [--dispatches 10000000] [--kernels 3000] [--rocpd]
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path

import numpy as np

HEADER = ["Kind", "Agent_Id", "Queue_Id", "Stream_Id", "Thread_Id", "Dispatch_Id", "Kernel_Id", "Kernel_Name",
          "Correlation_Id", "Start_Timestamp", "End_Timestamp", "LDS_Block_Size", "Scratch_Size", "VGPR_Count",
          "Accum_VGPR_Count", "SGPR_Count", "Workgroup_Size_X", "Workgroup_Size_Y", "Workgroup_Size_Z",
          "Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z"]
CHUNK = 500_000


def kernel_names(count: int, rng: np.random.Generator) -> list[str]:
    ops = ["MulFunctor", "AddFunctor", "GeluBackwardFunctor", "LayerNormForward", "SoftmaxForward", "CopyFunctor"]
    types = ["float", "c10::Half", "c10::BFloat16", "double", "int", "long"]
    names = []
    for i in range(count):
        op, t = ops[i % len(ops)], types[(i // len(ops)) % len(types)]
        vec = 1 << (i % 4)
        names.append(f"void at::native::vectorized_elementwise_kernel<{vec}, at::native::AUnaryFunctor<{t}, {t}, {t}, "
                     f"at::native::binary_internal::{op}<{t}> >, at::detail::Array<char*, 2> >(int, "
                     f"at::native::AUnaryFunctor<{t}, {t}, {t}, at::native::binary_internal::{op}<{t}> >, "
                     f"at::detail::Array<char*, 2>) [variant {i}]")
    return names


def zipf_ids(n: int, kernels: int, rng: np.random.Generator) -> np.ndarray:
    weights = 1.0 / np.arange(1, kernels + 1) ** 1.1
    return rng.choice(kernels, size=n, p=weights / weights.sum())


def write_csv(path: Path, n: int, names: list[str], rng: np.random.Generator) -> None:
    quoted = np.array(['"' + name.replace('"', '""') + '"' for name in names], dtype=object)
    with open(path, "w") as fh:
        fh.write(",".join(f'"{h}"' for h in HEADER) + "\n")
        start = 1_550_151_853_029_637
        for offset in range(0, n, CHUNK):
            m = min(CHUNK, n - offset)
            ids = zipf_ids(m, len(names), rng)
            durations = rng.integers(1_000, 200_000, size=m)
            starts = start + np.cumsum(rng.integers(100, 5_000, size=m)) + np.cumsum(durations)
            start = int(starts[-1]) + 1
            dispatch = np.arange(offset + 1, offset + m + 1)
            lines = [f'"KERNEL_DISPATCH","Agent 4",1,1,834304,{d},{k},{nm},{d},{s},{s + du},0,0,8,0,16,64,1,1,1024,1024,1\n'
                     for d, k, nm, s, du in zip(dispatch.tolist(), ids.tolist(), quoted[ids].tolist(),
                                                starts.tolist(), durations.tolist())]
            fh.writelines(lines)


def write_rocpd(path: Path, n: int, names: list[str], rng: np.random.Generator) -> None:
    guid = "00000000-0000-0000-0000-000000000001"
    db = sqlite3.connect(path)
    db.executescript("""
        PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;
        CREATE TABLE rocpd_string (id INTEGER PRIMARY KEY, guid TEXT NOT NULL, string TEXT NOT NULL);
        CREATE TABLE rocpd_info_process (id INTEGER PRIMARY KEY, guid TEXT NOT NULL, nid INTEGER, ppid INTEGER,
                                         pid INTEGER, init BIGINT, fini BIGINT, start BIGINT, end BIGINT, command TEXT);
        CREATE TABLE rocpd_info_kernel_symbol (id INTEGER PRIMARY KEY, guid TEXT NOT NULL, kernel_name TEXT,
                                               display_name TEXT, code_object_id INTEGER);
        CREATE TABLE rocpd_kernel_dispatch (id INTEGER PRIMARY KEY, guid TEXT NOT NULL, nid INTEGER, pid INTEGER,
                                            tid INTEGER, agent_id INTEGER, kernel_id INTEGER, dispatch_id INTEGER,
                                            queue_id INTEGER, stream_id INTEGER, start BIGINT, end BIGINT,
                                            region_name_id INTEGER, event_id INTEGER);
        CREATE TABLE rocpd_memory_copy (id INTEGER PRIMARY KEY, guid TEXT NOT NULL, pid INTEGER, start BIGINT,
                                        end BIGINT, name_id INTEGER, size BIGINT, dst_agent_id INTEGER, src_agent_id INTEGER);
    """)
    db.execute("INSERT INTO rocpd_info_process VALUES (1, ?, 1, 1, 834304, 0, 0, 0, 0, 'python3 train.py')", (guid,))
    db.executemany("INSERT INTO rocpd_info_kernel_symbol VALUES (?, ?, ?, ?, 1)",
                   [(i, guid, n_, n_) for i, n_ in enumerate(names)])
    db.execute("INSERT INTO rocpd_string VALUES (1, ?, 'MEMORY_COPY_HOST_TO_DEVICE')", (guid,))
    db.execute("INSERT INTO rocpd_memory_copy VALUES (1, ?, 1, 10, 2010, 1, 1048576, 4, 0)", (guid,))
    start = 1_550_151_853_029_637
    for offset in range(0, n, CHUNK):
        m = min(CHUNK, n - offset)
        ids = zipf_ids(m, len(names), rng).tolist()
        durations = rng.integers(1_000, 200_000, size=m).tolist()
        rows = []
        for j in range(m):
            start += 1_000 + durations[j]
            rows.append((offset + j + 1, guid, 1, 1, 1, 4, ids[j], offset + j + 1, 1, 1, start, start + durations[j], 0, 0))
        db.executemany("INSERT INTO rocpd_kernel_dispatch VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
    db.commit()
    db.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--dispatches", type=int, default=10_000_000)
    parser.add_argument("--kernels", type=int, default=3000)
    parser.add_argument("--rocpd", action="store_true", help="also write results.db (rocpd)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    host = args.out / "bench-host"
    host.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    names = kernel_names(args.kernels, rng)
    started = time.perf_counter()
    write_csv(host / "834304_kernel_trace.csv", args.dispatches, names, rng)
    print(f"kernel_trace.csv: {args.dispatches:,} dispatches, "
          f"{(host / '834304_kernel_trace.csv').stat().st_size / 2**30:.2f} GiB in {time.perf_counter() - started:.0f} s")
    if args.rocpd:
        started = time.perf_counter()
        write_rocpd(host / "834304_results.db", args.dispatches, names, rng)
        print(f"results.db: {(host / '834304_results.db').stat().st_size / 2**30:.2f} GiB in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
