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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace_dir", type=Path)
    parser.add_argument("--synthetic", action="store_true")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
