"""A small CPU data-parallel training job (gloo) for launcher tests: started by torchrun (RANK,
WORLD_SIZE, MASTER_ADDR/PORT set) or by mpirun (Open MPI's variables mapped to torch's).

    ddp.py [--steps N] [--fail-rank R]   rank R exits with code 3 after its first step
           [--sleep-rank R --sleep-ms MS]  rank R sleeps MS between its backward (the allreduce) and
                                           its optimizer step: the others wait for it at the next one
"""
import argparse
import os
import time

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--fail-rank", type=int, default=None)
parser.add_argument("--sleep-rank", type=int, default=None)
parser.add_argument("--sleep-ms", type=float, default=0.0)
args = parser.parse_args()

if "OMPI_COMM_WORLD_RANK" in os.environ and "RANK" not in os.environ:  # mpirun: say it torch's way
    os.environ.update(RANK=os.environ["OMPI_COMM_WORLD_RANK"], WORLD_SIZE=os.environ["OMPI_COMM_WORLD_SIZE"],
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("DDP_PORT", "29533"))
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                                                      torch.nn.Linear(64, 8)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(args.steps):
    loss = model(torch.randn(32, 64)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    if args.sleep_rank == rank:
        time.sleep(args.sleep_ms / 1000)
    optimizer.step()
    if args.fail_rank == rank:
        print(f"rank {rank}: failing on purpose", flush=True)
        os._exit(3)  # a crash: no clean shutdown of the process group
print(f"rank {rank}: {args.steps} steps done", flush=True)
dist.destroy_process_group()
