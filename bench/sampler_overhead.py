#!/usr/bin/env python3
"""The GPU sampler's own cost (src/profilectl/telemetry/), beside the alternatives, on this machine.

For every telemetry source available here (NVML through pynvml, the amdsmi library, the `amd-smi`
and `rocm-smi` commands) it runs profilectl's Sampler for --seconds at 10 Hz and prints:
  - start: the time to open the source (import, init, first sweep): it delays the run's start;
  - CPU per sweep and CPU per second: the sampler thread's own CPU time (time.thread_time) plus,
    for command sources, the CPU of every command it ran (RUSAGE_CHILDREN);
  - the sweeps achieved and their median interval;
  - the slowdown of a CPU-bound child process (fixed work, timed) with the sampler on against off,
    alone and with every core busy, and of a GPU-bound one (a torch matmul loop) where a GPU is there.
Beside it, the alternative `nvidia-smi --query-gpu=... -lms 100` child process (where nvidia-smi is).

Without a GPU, --doubles measures profilectl's own share with the test doubles (tests/doubles):
the thread loop, the CSV writing, a command's spawn and JSON parsing, without any driver cost.

    python3 bench/sampler_overhead.py [--seconds 10] [--rounds 5] [--doubles]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
DOUBLES = REPO / "tests" / "doubles"

from profilectl.telemetry.model import SamplingPlan, SourceSpec  # noqa: E402
from profilectl.telemetry.sampler import Sampler, make_source  # noqa: E402
from profilectl.telemetry.source import SourceError  # noqa: E402

CPU_LOOP = "import time, hashlib\nt = time.perf_counter()\nh = b'x'\nfor _ in range({n}): h = hashlib.sha256(h).digest()\n" \
           "print(time.perf_counter() - t)"
GPU_LOOP = ("import time, torch\nd = 'cuda'\na = torch.randn(4096, 4096, device=d)\nfor _ in range(5): a @ a\n"
            "torch.cuda.synchronize()\nt = time.perf_counter()\nfor _ in range({n}): b = a @ a\n"
            "torch.cuda.synchronize()\nprint(time.perf_counter() - t)")
NVIDIA_SMI_QUERY = ["--query-gpu=timestamp,index,power.draw,memory.used,clocks.sm,temperature.gpu,utilization.gpu",
                    "--format=csv,noheader,nounits", "-lms", "100"]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def sources(doubles: bool) -> list[tuple[str, SourceSpec]]:
    """(label, spec) of every source that opens here."""
    found = []
    candidates = [("nvml", SourceSpec("nvml")), ("amdsmi", SourceSpec("amdsmi"))]
    for command in ("amd-smi", "rocm-smi"):
        path = str(DOUBLES / command) if doubles else shutil.which(command)
        if path:
            candidates.append((command, SourceSpec(command, path)))
    for label, spec in candidates:
        if spec.name in ("nvml", "amdsmi") and not importlib.util.find_spec("pynvml" if spec.name == "nvml" else "amdsmi"):
            continue
        source = make_source(spec, ())
        try:
            source.open()
        except SourceError as exc:
            print(f"  {label}: not measured ({exc})")
            continue
        finally:
            source.close()
        found.append((label + (" (test double)" if doubles else ""), spec))
    return found


def sample_for(spec: SourceSpec, seconds: float, folder: Path) -> dict[str, float]:
    before_children = children_cpu()
    began = time.perf_counter()
    sampler = Sampler.start(SamplingPlan(sources=(spec,), vendor="any"), folder)
    opened = time.perf_counter() - began
    time.sleep(seconds)
    power = sampler.stop()
    cpu = sampler.cpu_seconds + children_cpu() - before_children
    (folder / "telemetry.csv").unlink(missing_ok=True)
    sweeps = max(1, sampler.sweeps)
    return {"start_s": opened, "cpu_per_sweep_ms": 1e3 * cpu / sweeps, "cpu_per_s_ms": 1e3 * cpu / seconds,
            "sweeps": sampler.sweeps, "interval_ms": 1e3 * (power.interval_s if power else 0.0),
            "notes": len(sampler.notes)}


def nvidia_smi_for(seconds: float) -> dict[str, float] | None:
    if not shutil.which("nvidia-smi"):
        return None
    before = children_cpu()
    process = subprocess.Popen(["nvidia-smi", *NVIDIA_SMI_QUERY], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    time.sleep(seconds)
    process.terminate()
    out, _ = process.communicate()
    cpu = children_cpu() - before
    lines = [line for line in out.decode(errors="replace").splitlines() if line.strip()]
    gpus = len({line.split(",")[1] for line in lines}) or 1
    sweeps = max(1, len(lines) // gpus)
    return {"cpu_per_sweep_ms": 1e3 * cpu / sweeps, "cpu_per_s_ms": 1e3 * cpu / seconds, "sweeps": sweeps}


def timed(code: str, copies: int = 1) -> float:
    """Seconds of the fixed work in the first of `copies` concurrent children (the others keep cores busy)."""
    processes = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE) for _ in range(copies)]
    outs = [p.communicate()[0] for p in processes]
    return float(outs[0].decode().strip().splitlines()[-1])


def slowdown(spec: SourceSpec | str | None, code: str, rounds: int, folder: Path,
             copies: int = 1) -> tuple[float, float, float, float]:
    """Median and minimum seconds with sampling off and on (alternating rounds): (median off, median
    on, min off, min on). spec None: the nvidia-smi child; "none": no sampling in either arm (the
    machine's own noise between two identical sets of runs)."""
    off, on = [], []
    for _ in range(rounds):
        off.append(timed(code, copies))
        if spec == "none":
            on.append(timed(code, copies))
        elif spec is None:
            process = subprocess.Popen(["nvidia-smi", *NVIDIA_SMI_QUERY], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
            try:
                on.append(timed(code, copies))
            finally:
                process.terminate()
                process.wait()
        else:
            assert isinstance(spec, SourceSpec)
            sampler = Sampler.start(SamplingPlan(sources=(spec,), vendor="any"), folder)
            try:
                on.append(timed(code, copies))
            finally:
                sampler.stop()
                (folder / "telemetry.csv").unlink(missing_ok=True)
    return statistics.median(off), statistics.median(on), min(off), min(on)


def has_cuda_torch() -> bool:
    if not importlib.util.find_spec("torch"):
        return False
    done = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                          capture_output=True, text=True)
    return done.stdout.strip() == "True"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="sampling time per source (default 10)")
    parser.add_argument("--rounds", type=int, default=5, help="timed workload runs, off and on each (default 5)")
    parser.add_argument("--work", type=int, default=2_000_000, help="sha256 rounds of the CPU-bound child")
    parser.add_argument("--doubles", action="store_true", help="measure with the test doubles (no GPU needed)")
    args = parser.parse_args()
    if args.doubles:
        sys.path.insert(0, str(DOUBLES / "lib-pynvml"))
        sys.path.insert(0, str(DOUBLES / "lib-amdsmi"))
        os.environ.setdefault("FAKE_NVML_GPUS", "8")
        os.environ.setdefault("FAKE_SMI_GPUS", "8")
    print(f"sampler overhead on {os.cpu_count()} CPU(s), {args.seconds:g} s per source at 10 Hz"
          + (" (test doubles: profilectl's own share, no driver)" if args.doubles else ""))
    folder = Path(tempfile.mkdtemp(prefix="sampler-bench-"))
    found = sources(args.doubles)
    cpu_code = CPU_LOOP.format(n=args.work)
    gpu = has_cuda_torch()
    print(f"\n{'source':<26}{'start':>9}{'CPU/sweep':>11}{'CPU/s':>10}{'sweeps':>8}{'interval':>10}")
    for label, spec in found:
        r = sample_for(spec, args.seconds, folder)
        print(f"{label:<26}{r['start_s'] * 1e3:>7.0f}ms{r['cpu_per_sweep_ms']:>9.2f}ms{r['cpu_per_s_ms']:>8.1f}ms"
              f"{r['sweeps']:>8.0f}{r['interval_ms']:>8.0f}ms")
    smi = nvidia_smi_for(args.seconds)
    if smi:
        print(f"{'nvidia-smi -lms 100 child':<26}{'-':>9}{smi['cpu_per_sweep_ms']:>9.2f}ms{smi['cpu_per_s_ms']:>8.1f}ms"
              f"{smi['sweeps']:>8.0f}{100:>8.0f}ms")
    alternatives: list[tuple[str, SourceSpec | str | None]] = [("no sampling (noise floor)", "none")]
    alternatives += list(found) + ([("nvidia-smi -lms 100 child", None)] if smi else [])
    workloads = [("CPU-bound, alone", cpu_code, 1), (f"CPU-bound, {os.cpu_count()} copies", cpu_code, os.cpu_count() or 1)]
    if gpu:
        workloads.append(("GPU-bound matmul", GPU_LOOP.format(n=400), 1))
    for title, code, copies in workloads:
        print(f"\n{title}: {args.rounds} runs each, sampling off -> on (median; minimum)")
        for label, maybe_spec in alternatives:
            off, on, low_off, low_on = slowdown(maybe_spec, code, args.rounds, folder, copies)
            print(f"  {label:<26}{off:>8.3f} s -> {on:.3f} s ({100 * (on - off) / off:+.2f} %);"
                  f"  {low_off:.3f} s -> {low_on:.3f} s ({100 * (low_on - low_off) / low_off:+.2f} %)")
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
