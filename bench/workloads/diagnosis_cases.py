#!/usr/bin/env python3
"""Workloads whose bottleneck is known, for the diagnosis's known-answer checks (issue 19; the
traces they gave on the device's GPU are tests/fixtures/diagnosis/, see tests/fixtures/README.md).

    diagnosis_cases.py CASE [--steps N]

compile    torch.compile of a small MLP: the first step compiles (Inductor/Triton) for seconds
ddp        2 ranks (torchrun) over gloo, both on one GPU: the allreduce runs on the CPU
straggler  as ddp, rank 1 sleeps 50 ms every step: rank 0 waits for it in every allreduce
crash      as ddp, rank 1 raises RuntimeError at step 5
own        the workload runs torch.profiler itself (tensorboard_trace_handler into ./own-traces)
launch     a loop of thousands of tiny kernels: launch-bound
input      a DataLoader whose samples take 2 ms each to make: input-bound
item       a .item() after every small matmul, CPU work on the value: synchronisation-bound
"""
import argparse
import os
import time

import torch

parser = argparse.ArgumentParser()
parser.add_argument("case")
parser.add_argument("--steps", type=int, default=10)
args = parser.parse_args()
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)


def mlp(width=1024, depth=4):
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers).to(device)


def train(model, batches, steps, before_step=None):
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    for step in range(steps):
        if before_step:
            before_step(step)
        x = batches(step)
        loss = model(x).pow(2).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()  # profilectl's step mark
    if device.type == "cuda":
        torch.cuda.synchronize()


def random_batch(step, rows=256, width=1024):
    return torch.randn(rows, width, device=device)


if args.case == "compile":
    model = torch.compile(mlp(512, 3))
    train(model, lambda s: random_batch(s, 128, 512), args.steps)

elif args.case in ("ddp", "straggler", "crash"):
    import torch.distributed as dist
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = torch.nn.parallel.DistributedDataParallel(mlp(1024, 3))

    def before_step(step):
        if args.case == "straggler" and rank == 1:
            time.sleep(0.050)
        if args.case == "crash" and rank == 1 and step == 5:
            raise RuntimeError("rank 1 fails on purpose at step 5")
    train(model, random_batch, args.steps, before_step)
    dist.destroy_process_group()

elif args.case == "own":
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
    model = mlp(1024, 3)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities, schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
                 on_trace_ready=tensorboard_trace_handler(os.path.abspath("own-traces"), use_gzip=True)) as prof:
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
        for step in range(args.steps):
            loss = model(random_batch(step)).pow(2).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            prof.step()

elif args.case == "launch":
    weight = torch.nn.Parameter(torch.ones(16, device=device))

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = weight

        def forward(self, x):
            for _ in range(150):  # 150 tiny elementwise kernels per forward, each far shorter than its launch
                x = x * self.weight + 1e-3
            return x
    train(Tiny(), lambda s: torch.ones(16, device=device), args.steps)

elif args.case == "input":
    class Slow(torch.utils.data.Dataset):
        def __len__(self):
            return 10_000

        def __getitem__(self, index):
            time.sleep(0.002)  # decoding, augmentation: 2 ms of host work per sample
            return torch.randn(1024)
    loader = iter(torch.utils.data.DataLoader(Slow(), batch_size=16, num_workers=0))
    model = mlp(1024, 3)
    train(model, lambda s: next(loader).to(device), args.steps)

elif args.case == "item":
    model = mlp(1024, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    for step in range(args.steps):
        total = 0.0
        for chunk in range(20):
            loss = model(random_batch(step, 512)).pow(2).mean()
            value = loss.item()  # a synchronisation: the host waits for the GPU, then the GPU waits for it
            total += sum(value * i for i in range(20_000))  # host-side metric work on the value (~1 ms)
        loss.backward()
        optimizer.step()
else:
    raise SystemExit(f"unknown case {args.case}")
print(f"{args.case}: done", flush=True)
