"""Built-in workload: matrix multiplies and a memory copy, so every service runs with no argument.

PyTorch on the GPU when there is one (ROCm or CUDA). On a CPU: PyTorch when the run profiles it
(torch.profiler needs torch ops to record), else NumPy, PyTorch when NumPy is absent, plain Python
(a smaller problem) when both are. Prints one line of what it did; exits 0.

The size follows the device: 1024 on a GPU (kernels worth profiling), 256 on a CPU, where a
1024-square matmul ten times takes seconds per run on a plain PyTorch CPU build, and a `profile` run
repeats it six times. A host with no GPU device node does not even import PyTorch unless the run
profiles it (importing it costs seconds too).

    python3 matmul.py [--size N] [--iters K] [--device auto|gpu|cpu] [--seconds S]
--seconds keeps looping until that much time has passed (for long-run tests such as interruption).
"""

import argparse
import glob
import os
import time

SIZES = {"gpu": 1024, "cpu": 256}


def default_size(device, requested=None):
    return requested if requested else SIZES[device]


def gpu_device_nodes():
    """Whether this host (or container) shows a GPU at all: AMD's KFD or an NVIDIA device node."""
    return os.path.exists("/dev/kfd") or bool(glob.glob("/dev/nvidia[0-9]*"))


def torch_wanted(device):
    """Import PyTorch? For a GPU that may be there, or when profilectl's torch.profiler hook is in
    this process (PROFILECTL_TORCH_OUT: a torch trace is being recorded, so give it torch ops)."""
    return device != "cpu" and gpu_device_nodes() or bool(os.environ.get("PROFILECTL_TORCH_OUT"))


def run_torch(torch, size, iters, device):
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    c = a @ b
    for _ in range(iters - 1):
        c = a @ b
    host = torch.empty(size, size, pin_memory=device != "cpu")
    host.copy_(c)  # device-to-host copy: shows as a memory copy in traces
    if device != "cpu":
        torch.cuda.synchronize()
    return float(host[0, 0])


def run_numpy(size, iters):
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    for _ in range(iters):
        c = a @ b
    copy = c.copy()
    return float(copy[0, 0])


def run_python(size, iters):
    """No NumPy either: a plain-Python matmul, capped so a bare interpreter still finishes quickly."""
    import random

    n = min(size, 96)
    rng = random.Random(0)
    a = [[rng.random() for _ in range(n)] for _ in range(n)]
    b_t = [[rng.random() for _ in range(n)] for _ in range(n)]
    c = None
    for _ in range(iters):
        c = [[sum(x * y for x, y in zip(row, col)) for col in b_t] for row in a]
    return c[0][0], n


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=0, help="matrix side (default: 1024 on a GPU, 256 on a CPU)")
    parser.add_argument("--iters", type=int, default=10, help="matmuls per round (default 10)")
    parser.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto", help="default: a GPU if any")
    parser.add_argument("--seconds", type=float, default=0.0, help="repeat rounds for this long")
    args = parser.parse_args()

    torch = None
    if args.device == "gpu" or torch_wanted(args.device):
        try:
            import torch
        except ImportError:
            torch = None
    try:
        import numpy
    except ImportError:
        numpy = None
    gpu = torch is not None and torch.cuda.is_available() and args.device != "cpu"
    if args.device == "gpu" and not gpu:
        parser.error("--device gpu: no GPU visible to PyTorch")
    if not gpu and numpy is not None and not os.environ.get("PROFILECTL_TORCH_OUT"):
        torch = None  # NumPy on a CPU, as the README says, unless torch.profiler is recording
    engine = ("torch-gpu" if gpu else "torch-cpu") if torch is not None else \
        "numpy-cpu" if numpy is not None else "python-cpu"
    if torch is None and numpy is None and not gpu:
        try:  # neither NumPy nor a GPU: PyTorch on the CPU still beats plain Python
            import torch
            engine = "torch-cpu"
        except ImportError:
            pass
    args.size = default_size("gpu" if gpu else "cpu", args.size)
    size = args.size

    deadline = time.monotonic() + args.seconds
    rounds = 0
    started = time.perf_counter()
    while True:
        if torch is not None:
            run_torch(torch, args.size, args.iters, "cuda" if gpu else "cpu")
        elif numpy is not None:
            run_numpy(args.size, args.iters)
        else:
            _, size = run_python(args.size, args.iters)
        rounds += 1
        if time.monotonic() >= deadline:
            break
    elapsed = time.perf_counter() - started
    flops = 2.0 * size ** 3 * args.iters * rounds
    print(f"matmul workload: engine={engine} size={size} iters={args.iters} rounds={rounds} "
          f"time={elapsed:.4f}s rate={flops / elapsed / 1e9:.1f} GFLOP/s")


if __name__ == "__main__":
    main()
