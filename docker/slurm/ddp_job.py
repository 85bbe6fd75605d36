#!/usr/bin/env python3
"""A tiny CPU DistributedDataParallel job (gloo backend) for the SLURM test cluster.

Launch one process per rank with srun; SLURM gives each its rank:
    cluster.sh exec srun -N2 -n4 python3 /opt/slurm-cluster/ddp_job.py --steps 5

Rank and world come from SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID; the rendezvous address is
the first host of the step's node list (`scontrol show hostnames`), where rank 0 runs under srun's
default block distribution; the port is derived from the job and step ids so concurrent steps do
not collide. MASTER_ADDR / MASTER_PORT in the environment take precedence.

Every rank writes <out>/rank<R>.json after every step (atomically: write then rename, so a reader,
or a node that dies, never leaves a half-written file) with its host, SLURM ids, the step reached,
the loss, the all_reduce result and a checksum of the model parameters (equal on all ranks when
DDP keeps them in sync), and a status: running, done, failed (e.g. a peer died) or terminated
(SIGTERM from SLURM). Default <out>: /workspace/traces/ddp-<job id>.<step id>.
"""

import argparse
import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import time


def first_host(nodelist):
    names = subprocess.run(["scontrol", "show", "hostnames", nodelist], check=True, capture_output=True,
                           text=True).stdout.split()
    return names[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--step-seconds", type=float, default=0.0, help="sleep after each step (longer jobs)")
    parser.add_argument("--out", help="folder for rank<R>.json (default /workspace/traces/ddp-<job>.<step>)")
    parser.add_argument("--timeout", type=float, default=60.0, help="gloo timeout (s) for rendezvous and collectives")
    args = parser.parse_args()

    env = os.environ
    rank, world, local_rank = int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"]), int(env.get("SLURM_LOCALID", 0))
    job_id, step_id = env.get("SLURM_JOB_ID", "0"), env.get("SLURM_STEP_ID", "0")
    # The step's nodes, not the job's: inside an sbatch allocation a step may use fewer nodes.
    nodelist = env.get("SLURM_STEP_NODELIST") or env["SLURM_JOB_NODELIST"]
    master_addr = env.get("MASTER_ADDR") or first_host(nodelist)
    master_port = int(env.get("MASTER_PORT") or 20000 + (int(job_id) * 16 + int(step_id)) % 20000)
    out = args.out or f"/workspace/traces/ddp-{job_id}.{step_id}"
    os.makedirs(out, exist_ok=True)
    host = socket.gethostname()

    record = {"rank": rank, "world_size": world, "local_rank": local_rank, "host": host,
              "slurmd_nodename": env.get("SLURMD_NODENAME"), "node_id": env.get("SLURM_NODEID"),
              "job_id": job_id, "step_id": step_id, "nodelist": nodelist, "master": f"{master_addr}:{master_port}",
              "pid": os.getpid(), "steps": args.steps, "step": 0, "status": "starting"}

    def write(**changes):
        record.update(changes, time=time.time())
        path = os.path.join(out, f"rank{rank}.json")
        tmp = f"{path}.tmp"
        with open(tmp, "w") as f:
            json.dump(record, f, indent=1)
        owner = (env.get("PROFILECTL_HOST_UID"), env.get("PROFILECTL_HOST_GID"))
        if all(owner) and os.geteuid() == 0:  # hand the file to the host user, as profilectl does
            os.chown(tmp, int(owner[0]), int(owner[1]))
        os.replace(tmp, path)

    def on_sigterm(signum, frame):  # SLURM cancels a job (or a node fails) with SIGTERM, then SIGKILL
        write(status="terminated", error=f"signal {signum}")
        print(f"rank {rank} on {host}: terminated at step {record['step']}", flush=True)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_sigterm)
    write()

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    try:
        dist.init_process_group("gloo", init_method=f"tcp://{master_addr}:{master_port}", rank=rank,
                                world_size=world, timeout=datetime.timedelta(seconds=args.timeout))
        torch.manual_seed(0)
        model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                                            torch.nn.Linear(32, 4)))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        data = torch.Generator().manual_seed(1000 + rank)  # each rank its own batch
        write(status="running")
        for step in range(1, args.steps + 1):
            x, y = torch.randn(8, 16, generator=data), torch.randn(8, 4, generator=data)
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()  # DDP all-reduces the gradients here
            optimizer.step()
            total = torch.tensor([float(rank + 1)])
            dist.all_reduce(total)  # explicit collective: sum of rank+1 over all ranks
            checksum = float(sum(p.detach().double().sum() for p in model.parameters()))
            write(step=step, loss=float(loss), allreduce_sum=float(total), param_checksum=round(checksum, 9))
            if args.step_seconds:
                time.sleep(args.step_seconds)
        dist.barrier()
        dist.destroy_process_group()
    except Exception as e:  # e.g. gloo: a peer on a node that died closed the connection
        write(status="failed", error=f"{type(e).__name__}: {e}"[:2000])
        print(f"rank {rank} on {host}: failed at step {record['step']}: {e}", file=sys.stderr, flush=True)
        return 1
    write(status="done")
    print(f"rank {rank}/{world} on {host} (local rank {local_rank}): done {args.steps} steps, "
          f"loss {record['loss']:.4f}, all_reduce {record['allreduce_sum']:g}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
