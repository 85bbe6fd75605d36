"""Two ranks without torch, for the live view (--live, `profilectl watch`): this process starts ranks
0 and 1 as new interpreters (RANK set, as a launcher would: profilectl's start-up hook marks their
steps), each marks its steps with profilectl.step() and meets the other at a barrier every step (the
collective); rank R sleeps between the barrier and its step's end, as a rank whose host does more
after the collective than the others (logging, data loading).

    live_ranks.py [--steps N] [--step-ms MS] [--sleep-rank R] [--sleep-ms MS] [--sleep-from STEP]
"""
import argparse
import builtins
import multiprocessing
import os
import time


def mark_step():
    try:
        import profilectl
    except ImportError:  # not installed for this Python: the hook's marker itself
        marker = getattr(builtins, "_profilectl_step", None)
        if marker is not None:
            marker()
        return
    profilectl.step()


def rank_loop(rank, barrier, args):
    for step in range(args.steps):
        time.sleep(args.step_ms / 1000)  # the step's own work
        barrier.wait()  # the collective: every rank waits for the last to arrive
        if rank == args.sleep_rank and step >= args.sleep_from:
            time.sleep(args.sleep_ms / 1000)
        mark_step()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--step-ms", type=float, default=30.0)
    parser.add_argument("--sleep-rank", type=int, default=-1)
    parser.add_argument("--sleep-ms", type=float, default=50.0)
    parser.add_argument("--sleep-from", type=int, default=0, help="the first step (from 0) the rank sleeps in")
    args = parser.parse_args()
    spawn = multiprocessing.get_context("spawn")  # new interpreters: the start-up hook runs in each
    barrier = spawn.Barrier(2)
    ranks = []
    for rank in (0, 1):
        os.environ["RANK"] = str(rank)  # what the child inherits at its start
        process = spawn.Process(target=rank_loop, args=(rank, barrier, args))
        process.start()
        ranks.append(process)
    for process in ranks:
        process.join()
    print(f"live_ranks: {args.steps} steps done, exit codes {[p.exitcode for p in ranks]}", flush=True)
    raise SystemExit(max(abs(p.exitcode or 0) for p in ranks))


if __name__ == "__main__":
    main()
