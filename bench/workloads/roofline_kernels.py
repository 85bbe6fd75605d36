#!/usr/bin/env python3
"""Three kernels whose roofline answer is known, for checking profilectl's roofline against Nsight
Compute's (bench/nvidia_roofline.sh, docs/validation.md):

  memory-bound   z = x + y on 2^28 float32 (3 GiB moved, 1 FLOP per 12 bytes)
  compute-bound  C = A @ B, bf16, 8192^3 (1.1 TFLOP over 384 MiB: intensity ~ thousands)
  latency-bound  t *= 1.0001 on 256 float32 (one block: neither roof is approached)

Each runs --repeat times, in that order; inputs are filled (fill kernels run first)."""

import argparse

import torch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--elements", type=int, default=1 << 28)
    parser.add_argument("--gemm", type=int, default=8192)
    args = parser.parse_args()
    x = torch.full((args.elements,), 1.0, device="cuda")
    y = torch.full((args.elements,), 2.0, device="cuda")
    z = torch.empty_like(x)
    a = torch.full((args.gemm, args.gemm), 0.5, device="cuda", dtype=torch.bfloat16)
    b = torch.full((args.gemm, args.gemm), 0.25, device="cuda", dtype=torch.bfloat16)
    c = torch.empty_like(a)
    t = torch.full((256,), 1.0, device="cuda")
    for _ in range(args.repeat):
        torch.add(x, y, out=z)
        torch.mm(a, b, out=c)
        t.mul_(1.0001)
    torch.cuda.synchronize()
    print(f"z[0]={z[0].item()} c[0,0]={c[0, 0].item()} t[0]={t[0].item()}")


if __name__ == "__main__":
    main()
