#!/usr/bin/env python3
"""Generates large profiler outputs for the reading benchmarks (bench/ingest.py runs it).

- kernel_trace.csv in the real ROCm 7.0 column layout (the header of rocprofiler-sdk's documented
  sample), N dispatches of a few thousand distinct kernels with long C++ template names and
  Zipf-like popularity;
- optionally a rocpd SQLite database of the same dispatches as rocprofv3 writes it (AMD's schema
  SQL, views over uuid-named tables, an event per dispatch: tests/rocpd_writer.py), which AMD's own
  views (`kernels`, `top_kernels`) read too;
- optionally one of each per rank (`--ranks N`: N processes' files side by side, the dispatches
  split between them);
- optionally a torch.profiler Chrome trace of about E events in kineto's layout (`--chrome E`,
  `--gzip` for a .json.gz too): a transformer-like step of nested operators (linear, attention
  calling itself through the dispatcher, add_, copy_), their runtime calls, kernels, copies and
  flow events.

    python3 bench/gen_trace.py OUT_DIR [--dispatches 10000000] [--kernels 3000] [--rocpd] [--no-csv]
                               [--ranks N] [--chrome EVENTS] [--gzip]
"""

from __future__ import annotations

import argparse
import gzip
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from rocpd_writer import RocpdWriter  # noqa: E402  (AMD's schema and writer's rows, shared with the tests)

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


def write_rocpd(path: Path, n: int, names: list[str], rng: np.random.Generator, pid: int = 834304) -> None:
    """The database `rocprofv3 --kernel-trace --memory-copy-trace --output-format rocpd` writes
    (tests/rocpd_writer.py: AMD's schema SQL, views over uuid-named tables, an event per dispatch
    whose stack_id is the internal correlation id of its launch), plus one host-to-device copy."""
    writer = RocpdWriter(path, pid=pid, fast=True)
    writer.copy("MEMORY_COPY_HOST_TO_DEVICE", 10, 2010, writer.api("hipMemcpy", 5, 2015, tid=pid), tid=pid)
    start = 1_550_151_853_029_637
    for offset in range(0, n, CHUNK):
        m = min(CHUNK, n - offset)
        ids = zipf_ids(m, len(names), rng).tolist()
        durations = rng.integers(1_000, 200_000, size=m).tolist()
        rows = []
        for j in range(m):
            start += 1_000 + durations[j]
            rows.append((names[ids[j]], start, start + durations[j], writer.correlation + j + 1))
        writer.correlation += m  # each dispatch's launch had its own internal correlation id
        writer.dispatches(rows, tid=pid)
    writer.close()


# ---------------------------------------------------------------------------------------------
# torch.profiler Chrome traces (kineto's layout)

PID, TID, GPU_TID = 834304, 834304, 7
BASE_NS = 4_444_282_165_212_637  # kineto writes CLOCK_MONOTONIC-based microseconds with 3 decimals
SHAPES = ('"Input Dims": [[8, 512, 4096], [4096, 4096], [4096], [], [8, 512, 4096]], "Input type": '
          '["c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "Scalar", "c10::BFloat16"], "Input Strides": '
          '[[2097152, 4096, 1], [4096, 1], [1], [], [2097152, 4096, 1]], "Concrete Inputs": ["", "", "", "1", ""]')


def _us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def _cpu_event(cat: str, name: str, start: int, dur: int, ext: int, seq: int) -> str:
    return (f'  {{\n    "ph": "X", "cat": "{cat}", "name": "{name}", "pid": {PID}, "tid": {TID},\n'
            f'    "ts": {_us(start)}, "dur": {_us(dur)},\n    "args": {{\n'
            f'      "External id": {ext},"Record function id": 0, {SHAPES}, "Sequence number": {seq}, '
            f'"Fwd thread id": 0, "Ev Idx": {seq}\n    }}\n  }}')


def _runtime_event(name: str, start: int, dur: int, ext: int, corr: int) -> str:
    return (f'  {{\n    "ph": "X", "cat": "cuda_runtime", "name": "{name}", "pid": {PID}, "tid": {TID},\n'
            f'    "ts": {_us(start)}, "dur": {_us(dur)},\n    "args": {{\n'
            f'      "External id": {ext},      "cbid": 211, "correlation": {corr}\n    }}\n  }}')


def _gpu_event(cat: str, name: str, start: int, dur: int, ext: int, corr: int) -> str:
    return (f'  {{\n    "ph": "X", "cat": "{cat}", "name": "{name}", "pid": 0, "tid": {GPU_TID},\n'
            f'    "ts": {_us(start)}, "dur": {_us(dur)},\n    "args": {{\n'
            f'      "External id": {ext},      "queued": 0, "device": 0, "context": 1,      "stream": {GPU_TID}, '
            f'"correlation": {corr},      "registers per thread": 254,      "shared memory": 67584,      '
            f'"blocks per SM": 3.878788,      "warps per SM": 31.030304,      "grid": [16, 32, 1],      '
            f'"block": [256, 1, 1],      "est. achieved occupancy %": 0\n    }}\n  }}')


def _flows(start: int, gpu_start: int, corr: int) -> list[str]:
    return [f'  {{\n    "ph": "s", "id": {corr}, "pid": {PID}, "tid": {TID}, "ts": {_us(start)},\n'
            f'    "cat": "ac2g", "name": "ac2g"\n  }}',
            f'  {{\n    "ph": "f", "id": {corr}, "pid": 0, "tid": {GPU_TID}, "ts": {_us(gpu_start)},\n'
            f'    "cat": "ac2g", "name": "ac2g", "bp": "e"\n  }}']


GEMMS = [f"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize{t}x128x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas"
         for t in (64, 128, 256)]
ELEMENTWISE = [f"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<{t}>, "
               f"at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<{t}>, at::detail::Array<char*, 3>)"
               for t in ("float", "c10::BFloat16", "c10::Half")]
FLASH = "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)"


def _layer(rng: random.Random, t: int, ext: int, seq: int, corr: int, gpu_t: int,
           cpu: list[tuple[int, str]], gpu: list[str]) -> tuple[int, int, int, int, int]:
    """One transformer-like layer: linear (t, transpose, addmm + a GEMM), scaled_dot_product_attention
    calling itself through the dispatcher (one child of the same name: torch merges the pair), add_,
    copy_ (a memcpy) and aten::is_leaf (which torch leaves out of key_averages)."""
    def op(name: str, start: int, dur: int, cat: str = "cpu_op") -> None:
        nonlocal ext, seq
        ext += 1
        seq += 1
        cpu.append((start, _cpu_event(cat, name, start, dur, ext, seq)))

    def launch(name: str, start: int, kernel: str, cat: str = "kernel", api: str = "cudaLaunchKernel") -> int:
        nonlocal corr, gpu_t
        corr += 1
        dur = rng.randint(3_000, 9_000)
        gpu_t = max(gpu_t, start + dur) + rng.randint(500, 3_000)
        kernel_dur = rng.randint(5_000, 400_000)
        gpu.append(_runtime_event(api, start, dur, ext, corr))
        gpu.append(_gpu_event(cat, kernel, gpu_t, kernel_dur, ext, corr))
        gpu.extend(_flows(start, gpu_t, corr))
        gpu_t += kernel_dur
        return dur

    # aten::linear > aten::t > aten::transpose > aten::as_strided ; aten::addmm > cudaLaunchKernel
    start = t
    t += 1_000
    t_start = t
    t += 800
    op("aten::as_strided", t + 300, 900)
    op("aten::transpose", t, 1_600)
    t += 2_000
    op("aten::t", t_start, t - t_start)
    t += 500
    addmm_start = t
    t += 2_000
    t += launch("aten::addmm", t, rng.choice(GEMMS)) + 1_500
    op("aten::addmm", addmm_start, t - addmm_start)
    t += 700
    op("aten::linear", start, t - start)
    t += 1_000
    # scaled_dot_product_attention > scaled_dot_product_attention > _flash_attention_forward > empty, launch
    sdpa = t
    t += 1_200
    inner = t
    t += 900
    fwd = t
    t += 600
    op("aten::empty", t, 1_400)
    t += 2_000
    t += launch("aten::_flash_attention_forward", t, FLASH) + 800
    op("aten::_flash_attention_forward", fwd, t - fwd)
    t += 400
    op("aten::scaled_dot_product_attention", inner, t - inner)
    t += 700
    op("aten::scaled_dot_product_attention", sdpa, t - sdpa)
    t += 800
    # add_ > launch ; copy_ > cudaMemcpyAsync (a copy) ; is_leaf
    add = t
    t += 900
    t += launch("aten::add_", t, rng.choice(ELEMENTWISE)) + 600
    op("aten::add_", add, t - add)
    t += 500
    copy = t
    t += 1_100
    t += launch("aten::copy_", t, "Memcpy DtoD (Device -> Device)", "gpu_memcpy", "cudaMemcpyAsync") + 900
    op("aten::copy_", copy, t - copy)
    t += 300
    op("aten::is_leaf", t, 200)
    t += 1_000
    return t, ext, seq, corr, gpu_t


def _step(seed: int, step: int, layers: int, t: int, ext: int, seq: int, corr: int,
          gpu_t: int) -> tuple[list[str], list[str], tuple[int, int, int, int, int]]:
    rng = random.Random(seed * 1_000_003 + step)
    cpu: list[tuple[int, str]] = []
    gpu: list[str] = []
    start = t
    t += 5_000
    for _ in range(layers):
        t, ext, seq, corr, gpu_t = _layer(rng, t, ext, seq, corr, gpu_t, cpu, gpu)
    t += 5_000
    ext += 1
    cpu.append((start, _cpu_event("user_annotation", f"ProfilerStep#{step}", start, t - start, ext, 0)))
    cpu.sort()  # kineto lists a thread's CPU events by start time; GPU activities follow in their own order
    return [text for _, text in cpu], gpu, (t + 20_000, ext, seq, corr, gpu_t)


EVENTS_PER_LAYER = 28  # 12 CPU ops; 4 launches, each a runtime call, a GPU activity and 2 flow events


def write_chrome(path: Path, events: int, seed: int = 7, compress: bool = False) -> int:
    """A torch.profiler trace of about `events` events in kineto's layout: CPU ops first (by start
    time), then runtime calls, kernels, copies and flow events, then the metadata. Returns the
    number of events written."""
    layers = 40
    per_step = layers * EVENTS_PER_LAYER + 1
    steps = max(1, events // per_step)
    opener = (lambda p: gzip.open(p, "wt", compresslevel=1)) if compress else (lambda p: open(p, "w"))
    written = 0
    with opener(path) as fh:
        fh.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {\n      "id": 0, "name": "NVIDIA H200", '
                 '"totalGlobalMem": 150109880320,\n      "computeMajor": 9, "computeMinor": 0\n    }\n  ],\n'
                 '  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": 1790857026000000000,\n  "traceEvents": [\n')
        first = True
        for phase in (0, 1):
            state = (BASE_NS, 0, 0, 0, BASE_NS)
            for step in range(steps):
                cpu, gpu, state = _step(seed, step, layers, *state)
                chunk = cpu if phase == 0 else gpu
                if chunk:
                    fh.write(("" if first else ",\n") + ",\n".join(chunk))
                    first = False
                    written += len(chunk)
        fh.write(',\n  {\n    "name": "process_name", "ph": "M", "ts": 4444282165212.637, "pid": 834304, "tid": 0,\n'
                 '    "args": {\n      "name": "python3 train.py"\n    }\n  },\n'
                 '  {\n    "ph": "X", "cat": "Trace", "ts": 4444282165212.637, "dur": 193570.497,\n'
                 '    "pid": "Spans", "tid": "PyTorch Profiler",\n    "name": "PyTorch Profiler (0)",\n'
                 '    "args": {\n      "Op count": 0\n    }\n  },\n'
                 '  {\n    "name": "Record Window End", "ph": "i", "s": "g",\n    "pid": "", "tid": "", '
                 '"ts": 4444282359091.792\n  }\n  ],\n  "traceName": "/root/out/torch_trace.json"\n}\n')
    return written + 3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--dispatches", type=int, default=10_000_000)
    parser.add_argument("--kernels", type=int, default=3000)
    parser.add_argument("--rocpd", action="store_true", help="also write results.db (rocpd)")
    parser.add_argument("--no-csv", action="store_true", help="no kernel_trace.csv")
    parser.add_argument("--ranks", type=int, default=1, help="split the dispatches over this many processes")
    parser.add_argument("--chrome", type=int, default=0, metavar="EVENTS", help="also a torch Chrome trace")
    parser.add_argument("--gzip", action="store_true", help="the Chrome trace as .json.gz too")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    host = args.out / "bench-host"
    host.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    names = kernel_names(args.kernels, rng)
    per_rank = args.dispatches // args.ranks
    for rank in range(args.ranks):
        pid = 834304 + rank
        if not args.no_csv:
            started = time.perf_counter()
            write_csv(host / f"{pid}_kernel_trace.csv", per_rank, names, rng)
            print(f"{pid}_kernel_trace.csv: {per_rank:,} dispatches, "
                  f"{(host / f'{pid}_kernel_trace.csv').stat().st_size / 2**30:.2f} GiB in "
                  f"{time.perf_counter() - started:.0f} s")
        if args.rocpd:
            started = time.perf_counter()
            write_rocpd(host / f"{pid}_results.db", per_rank, names, rng)
            print(f"{pid}_results.db: {(host / f'{pid}_results.db').stat().st_size / 2**30:.2f} GiB in "
                  f"{time.perf_counter() - started:.0f} s")
    if args.chrome:
        started = time.perf_counter()
        trace = args.out / "torch_trace.json"
        written = write_chrome(trace, args.chrome, args.seed)
        print(f"torch_trace.json: {written:,} events, {trace.stat().st_size / 2**30:.2f} GiB in "
              f"{time.perf_counter() - started:.0f} s")
        if args.gzip:
            write_chrome(args.out / "torch_trace.json.gz", args.chrome, args.seed, compress=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
