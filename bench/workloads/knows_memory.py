#!/usr/bin/env python3
"""A small MLP trained for a few steps on one GPU, for the memory history's check
(bench/nvidia_trace_knows.sh): prints torch.cuda.max_memory_allocated() at the end as
`KNOWS_MAX_ALLOCATED N`; with --oom it then asks for more memory than the GPU has, printing the bytes
asked as `KNOWS_OOM_ASKED N` first, and fails with torch's OutOfMemoryError."""
import argparse

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--oom", action="store_true")
parser.add_argument("--steps", type=int, default=6)
args = parser.parse_args()
device = torch.device("cuda")
model = nn.Sequential(*[nn.Sequential(nn.Linear(4096, 4096), nn.GELU()) for _ in range(8)]).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
inputs = torch.randn(256, 4096, device=device)
for step in range(args.steps):
    loss = model(inputs).square().mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
torch.cuda.synchronize()
print(f"KNOWS_MAX_ALLOCATED {torch.cuda.max_memory_allocated()}", flush=True)
if args.oom:
    free, total = torch.cuda.mem_get_info()
    asked = total + (1 << 30)
    print(f"KNOWS_OOM_ASKED {asked}", flush=True)
    keep = torch.empty(asked, dtype=torch.uint8, device=device)
