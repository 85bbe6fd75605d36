"""Built-in workload: matrix multiplies and a memory copy, so every service runs with no argument.

PyTorch on the GPU when there is one (ROCm or CUDA), PyTorch on the CPU otherwise, NumPy when
PyTorch is absent, plain Python (a smaller problem) when both are. Prints one line of what it did;
exits 0.

    python3 matmul.py [--size N] [--iters K] [--device auto|gpu|cpu] [--seconds S]
--seconds keeps looping until that much time has passed (for long-run tests such as interruption).
"""

import argparse
import time


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
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto")
    parser.add_argument("--seconds", type=float, default=0.0)
    args = parser.parse_args()

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
    engine = ("torch-gpu" if gpu else "torch-cpu") if torch is not None else \
        "numpy-cpu" if numpy is not None else "python-cpu"
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
