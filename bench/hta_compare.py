#!/usr/bin/env python3
"""profilectl's timeline analysis beside Holistic Trace Analysis (HTA) on the same torch traces.

    python3 bench/hta_compare.py TRACE_DIR [--synthetic]

TRACE_DIR holds one kineto trace per rank (torch.profiler's export_chrome_trace / tensorboard
handler; HTA reads the rank from the trace's distributedInfo). --synthetic first writes the
two-rank scenario of tests/unit/test_timeline.py there (known answers) and adds distributedInfo.
Needs HTA (pip install HolisticTraceAnalysis; offline: its wheel with --no-deps plus plotly,
networkx, pydot, pyparsing, packaging, tenacity, psutil) and pandas. Prints, per rank, the numbers
both compute and what each calls them; differences are explained in docs/validation.md.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))


def synthetic(folder: Path) -> None:
    from unit.test_timeline import torch_trace  # the known-answer scenario
    folder.mkdir(parents=True, exist_ok=True)
    for rank, shift in ((0, 0.0), (1, 30.0)):
        path = torch_trace(folder / f"node1-rank{rank}-1{rank}.pt.trace.json", shift_us=shift)
        doc = json.loads(path.read_text())
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
        path.write_text(json.dumps(doc))


def profilectl_rows(folder: Path) -> dict[str, object]:
    from profilectl.analysis.timeline import analyse
    from profilectl.backends import READERS
    from profilectl.formats.reader import read_path
    began = time.perf_counter()
    found = analyse(read_path(folder, READERS).timelines)
    elapsed = time.perf_counter() - began
    assert found is not None, "no GPU events with timestamps in these traces"
    rows = found.ranks or (found.merged,)
    return {"seconds": elapsed, "rows": rows, "steps": found.steps}


def hta_rows(folder: Path) -> dict[str, object]:
    from hta.trace_analysis import TraceAnalysis
    began = time.perf_counter()
    # every kernel, as profilectl counts them (HTA's default drops those of the last profiler step)
    analyzer = TraceAnalysis(trace_dir=str(folder), include_last_profiler_step=True)
    temporal = analyzer.get_temporal_breakdown(visualize=False)
    overlap = analyzer.get_comm_comp_overlap(visualize=False)
    ranks = sorted(int(r) for r in temporal["rank"])
    launch = analyzer.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False)
    queue = analyzer.get_queue_length_summary(ranks=ranks)
    elapsed = time.perf_counter() - began
    return {"seconds": elapsed, "temporal": temporal, "overlap": overlap, "launch": launch, "queue": queue}


HTA_LAUNCHES = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync"}
HTA_NOT_COMPUTE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")  # HTA 0.5 utils.py


def _union_length(intervals: list[tuple[float, float]]) -> float:
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def explain(folder: Path) -> None:
    """The differences, each recomputed from the trace by HTA's own rules (HTA 0.5 source):
    its parser floors ns-resolution timestamps and durations to whole µs; its compute class leaves
    out names matching .*Memcpy, ^Memset and .*Sync; its short kernels are the GPU events launched
    by cudaLaunchKernel, cudaLaunchKernelExC, cudaMemcpyAsync or cudaMemsetAsync (copies and memsets
    included, driver-API launches such as cuLaunchKernelEx left out)."""
    import gzip
    import math
    for path in sorted(folder.iterdir()):
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt") as fh:
            doc = json.load(fh)
        rank = (doc.get("distributedInfo") or {}).get("rank", "?")
        events = [e for e in doc["traceEvents"] if e.get("ph") == "X" and "dur" in e]
        gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
        exact = _union_length([(e["ts"], e["ts"] + e["dur"]) for e in gpu])
        # HTA's parser (round_down_time_stamps): start rounded up, end rounded down, to whole µs
        def inward(e: dict) -> tuple[int, int]:
            return math.ceil(e["ts"]), math.floor(e["ts"] + e["dur"])
        floored = _union_length([inward(e) for e in gpu])
        compute = [e for e in gpu if e["cat"] == "kernel" and not HTA_NOT_COMPUTE.match(e["name"])]
        compute_floored = _union_length([inward(e) for e in compute])
        ours_compute = [e for e in gpu if e["cat"] == "kernel" and not re.search("nccl|rccl", e["name"], re.I)]
        calls = {e["args"]["correlation"]: e for e in events
                 if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
        hta_short = ours_short = 0
        launched_by: dict[str, int] = {}
        for e in gpu:
            call = calls.get((e.get("args") or {}).get("correlation"))
            if call is None:
                continue
            launched_by[call["name"]] = launched_by.get(call["name"], 0) + 1
            (k_start, k_end), (c_start, c_end) = inward(e), inward(call)
            if call["name"] in HTA_LAUNCHES and k_end - k_start < c_end - c_start:
                hta_short += 1
            if e["cat"] == "kernel" and e["dur"] < call["dur"]:
                ours_short += 1
        print(f"rank {rank} ({path.name}), recomputed from the trace:")
        print(f"  GPU busy: exact {exact:,.3f} µs; rounded inward to whole µs as HTA parses it {floored:,.0f} µs")
        print(f"  compute union: profilectl's rule (every non-NCCL kernel) exact "
              f"{_union_length([(e['ts'], e['ts'] + e['dur']) for e in ours_compute]):,.3f} µs; HTA's rule, floored "
              f"{compute_floored:,.0f} µs ({sum(1 for e in gpu if e['cat'] == 'kernel') - len(compute)} kernels "
              "HTA does not call compute, NCCL included)")
        print(f"  kernels shorter than their launch: HTA's rule {hta_short:,}; profilectl's rule {ours_short:,}")
        print("  GPU events by launch call: " + ", ".join(f"{k} {v:,}" for k, v in
                                                         sorted(launched_by.items(), key=lambda kv: -kv[1])))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace_dir", type=Path)
    parser.add_argument("--synthetic", action="store_true")
    parser.add_argument("--explain", action="store_true", help="recompute each difference by HTA's rules")
    args = parser.parse_args()
    if args.synthetic:
        synthetic(args.trace_dir)
    ours = profilectl_rows(args.trace_dir)
    theirs = hta_rows(args.trace_dir)
    temporal = theirs["temporal"].set_index("rank")
    overlap = theirs["overlap"].set_index("rank")
    print(f"{'rank':>4} {'quantity':<42} {'profilectl':>14} {'HTA':>14}")
    for row in ours["rows"]:
        rank = int(row.rank) if row.rank.isdigit() else 0
        t = temporal.loc[rank]
        pairs = [
            ("idle time (µs)", row.idle_ns / 1e3, t["idle_time(us)"]),
            ("idle share (%)", 100 - row.busy_percent, t["idle_time_pctg"]),
            ("busy / HTA compute + non-compute (µs)", row.busy_ns / 1e3,
             t["compute_time(us)"] + t["non_compute_time(us)"]),
            ("busy - compute / HTA non-compute (µs)", (row.busy_ns - row.compute_ns) / 1e3,
             t["non_compute_time(us)"]),
            ("span / HTA kernel_time (µs)", row.span_ns / 1e3, t["kernel_time(us)"]),
            ("compute kernels, union (µs)", row.compute_ns / 1e3, t["compute_time(us)"]),
            ("communication hidden under compute (%)", row.hidden_communication_percent or 0.0,
             overlap.loc[rank]["comp_comm_overlap_pctg"]),
        ]
        launch = theirs["launch"].get(rank)
        if launch is not None and len(launch):
            short = launch[launch["gpu_duration"] < launch["cpu_duration"]]
            pairs += [("kernels shorter than their launch", row.launch.short_kernels, len(short)),
                      ("launch delay, mean (µs)", (row.launch.launch_delay_mean_ns or 0) / 1e3,
                       launch["launch_delay"].mean())]
        queue = theirs["queue"]
        if queue is not None and len(queue):
            try:
                per_rank = queue.xs(rank, level="rank") if "rank" in queue.index.names else queue
                # HTA's is per stream; profilectl's counts every stream of the rank together
                pairs.append(("queue length, max (HTA: of its per-stream maxima)", row.launch.queue_depth_max,
                              per_rank[("queue_length", "max")].max()))
            except KeyError:
                pass
        for name, mine, hta in pairs:
            print(f"{rank:>4} {name:<42} {float(mine):>14.3f} {float(hta):>14.3f}")
    print(f"time: profilectl {ours['seconds']:.3f} s (reading included), HTA {theirs['seconds']:.3f} s")
    if args.explain:
        explain(args.trace_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
