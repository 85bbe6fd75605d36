#!/usr/bin/env python3
"""A GPT-style training loop for profiling benchmarks: ~135 M parameters by default (12 layers,
d_model 768, vocabulary 50257), bf16 autocast, AdamW; one rank or DDP under torchrun (NCCL).

    transformer_train.py [--steps 20] [--layers 12] [--width 768] [--batch 8] [--seq 512]
                         [--sleep-rank R --sleep-ms MS]
Prints the steady-state step time (steps after the first 3) and the whole loop's time (`loop=S`,
every step, from the first step's start to the last one's end) on rank 0; every rank prints its
own steady step time (`rank R step S ms`). --sleep-rank makes rank R sleep MS milliseconds on the
host at the start of every step (a known straggler: the others wait for it in DDP's all-reduce).
"""
import argparse
import os
import time

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--layers", type=int, default=12)
parser.add_argument("--width", type=int, default=768)
parser.add_argument("--batch", type=int, default=8)
parser.add_argument("--seq", type=int, default=512)
parser.add_argument("--vocab", type=int, default=50257)
parser.add_argument("--sleep-rank", type=int, default=-1)
parser.add_argument("--sleep-ms", type=float, default=0.0)
args = parser.parse_args()

distributed = "RANK" in os.environ
if distributed:
    import torch.distributed as dist
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank, local = dist.get_rank(), int(os.environ.get("LOCAL_RANK", 0))
else:
    rank, local = 0, 0
device = torch.device(f"cuda:{local}" if torch.cuda.is_available() else "cpu")
if device.type == "cuda":
    torch.cuda.set_device(device)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(args.vocab, args.width)
        layer = nn.TransformerEncoderLayer(args.width, args.width // 64, 4 * args.width, batch_first=True,
                                           norm_first=True, dropout=0.0)
        self.blocks = nn.TransformerEncoder(layer, args.layers)
        self.head = nn.Linear(args.width, args.vocab, bias=False)

    def forward(self, tokens):
        return self.head(self.blocks(self.embed(tokens)))


model = Model().to(device)
if distributed:
    model = nn.parallel.DistributedDataParallel(model, device_ids=[local] if device.type == "cuda" else None)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
params = sum(p.numel() for p in model.parameters())
tokens = torch.randint(0, args.vocab, (args.batch, args.seq), device=device)
times = []
loop_started = time.perf_counter()
for step in range(args.steps):
    started = time.perf_counter()
    if rank == args.sleep_rank:
        time.sleep(args.sleep_ms / 1000)
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
        logits = model(tokens)
        loss = nn.functional.cross_entropy(logits.view(-1, args.vocab).float(), tokens.view(-1))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    times.append(time.perf_counter() - started)
loop_s = time.perf_counter() - loop_started
if rank == 0:
    steady = times[3:] or times
    print(f"transformer_train: {params / 1e6:.0f} M parameters, {args.steps} steps, steady step "
          f"{1000 * sum(steady) / len(steady):.1f} ms, loss {loss.item():.3f}, loop={loop_s:.4f}s", flush=True)
if distributed:
    own = times[3:] or times
    print(f"transformer_train: rank {rank} step {1000 * sum(own) / len(own):.1f} ms", flush=True)
    dist.destroy_process_group()
