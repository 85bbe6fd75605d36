#!/usr/bin/env python3
"""Collectives of known sizes under torchrun, for the per-call table's check
(bench/nvidia_trace_knows.sh): allreduce, all_gather_into_tensor, reduce_scatter_tensor, broadcast
and all_to_all_single, ROUNDS times each; the last rank sleeps SLEEP_MS on the host before each call
(the others wait for it: it arrives last). Rank 0 prints what each call sends as `KNOWS_SENT {json}`
(nccl-tests' size: the whole array). --backend gloo runs them on CPU tensors."""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--backend", default="nccl")
parser.add_argument("--rounds", type=int, default=4)
parser.add_argument("--sleep-ms", type=float, default=20.0)
args = parser.parse_args()
dist.init_process_group(args.backend)
rank, world = dist.get_rank(), dist.get_world_size()
local = int(os.environ.get("LOCAL_RANK", 0))
device = torch.device(f"cuda:{local}") if args.backend == "nccl" else torch.device("cpu")
if device.type == "cuda":
    torch.cuda.set_device(device)
M = 1 << 20
calls = [
    ("allreduce", lambda: dist.all_reduce(torch.ones(4 * M, device=device)), 4 * M * 4, "Float"),
    ("allgather", lambda: dist.all_gather_into_tensor(torch.empty(world * M, device=device, dtype=torch.bfloat16),
                                                      torch.ones(M, device=device, dtype=torch.bfloat16)),
     world * M * 2, "BFloat16"),
    ("reduce_scatter", lambda: dist.reduce_scatter_tensor(torch.empty(M, device=device),
                                                          torch.ones(world * M, device=device)), world * M * 4, "Float"),
    ("broadcast", lambda: dist.broadcast(torch.ones(64 * 1024, device=device, dtype=torch.int64), src=0),
     64 * 1024 * 8, "Long"),
    ("alltoall", lambda: dist.all_to_all_single(torch.empty(world * M, device=device), torch.ones(world * M, device=device)),
     world * M * 4, "Float"),
]
if args.backend == "gloo":
    calls = [c for c in calls if c[0] in ("allreduce", "broadcast")]  # what gloo implements for CPU tensors
for _ in range(args.rounds):
    for name, call, size, dtype in calls:
        if rank == world - 1:
            time.sleep(args.sleep_ms / 1000)
        call()
if device.type == "cuda":
    torch.cuda.synchronize()
if rank == 0:
    for name, _, size, dtype in calls:
        print("KNOWS_SENT " + json.dumps({"kind": name, "bytes": size, "dtype": dtype, "calls": args.rounds,
                                          "ranks": world, "slow_rank": str(world - 1)}), flush=True)
dist.barrier()
dist.destroy_process_group()
