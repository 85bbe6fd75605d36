#!/usr/bin/env python3
"""profilectl's operator table against torch's own key_averages(), on a machine with PyTorch.

Runs a small attention model (scaled_dot_product_attention, which calls itself through the
dispatcher, plus linear layers and copies) under torch.profiler, exports the Chrome trace, reads it
with profilectl's torch reader, and compares every operator's calls, total ("CPU total") and self
time ("Self CPU") with key_averages(). Prints one line per difference and a verdict; exit 1 if any.

    python3 bench/torch_key_averages.py [--out DIR] [--steps 20] [--device cuda|cpu]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def profile(out: Path, steps: int, device: str) -> list[dict]:
    import torch
    from torch.profiler import ProfilerActivity, profile as torch_profile

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.GELU(), torch.nn.Linear(512, 512)).to(device)
    q = torch.randn(8, 8, 256, 64, device=device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with torch_profile(activities=activities) as prof:
        for _ in range(steps):
            x = torch.nn.functional.scaled_dot_product_attention(q, q, q)
            y = model(x.reshape(-1, 64).repeat(1, 8))
            z = y.to("cpu", non_blocking=False)
            del x, y, z
        if device == "cuda":
            torch.cuda.synchronize()
    prof.export_chrome_trace(str(out / "trace.json"))
    rows = [{"name": e.key, "count": e.count, "cpu_total_us": e.cpu_time_total, "self_cpu_us": e.self_cpu_time_total,
             "device_type": str(e.device_type), "user_annotation": bool(getattr(e, "is_user_annotation", False))}
            for e in prof.key_averages()]
    (out / "key_averages.json").write_text(json.dumps(rows, indent=1))
    (out / "key_averages.txt").write_text(prof.key_averages().table(sort_by="cpu_time_total", row_limit=40))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("torch-key-averages"))
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--device", default=None)
    args = parser.parse_args()
    import torch
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = profile(args.out, args.steps, device)
    sys.path.insert(0, str(REPO / "src"))
    from profilectl.formats import torch_trace

    tables = torch_trace.read(args.out / "trace.json")
    # key_averages also lists user annotations, runtime calls and kernels: compare the operators
    # profilectl reports (cpu_op events: CPU rows that are not user annotations)
    torch_ops = {r["name"]: r for r in rows if r["device_type"].endswith("CPU") and not r["user_annotation"]
                 and r["name"] in tables.operators}
    differences = 0
    print(f"device {device}, torch {torch.__version__}: {len(tables.operators)} operators in the trace, "
          f"{len(torch_ops)} of them in key_averages()")
    for name, stats in sorted(tables.operators.items(), key=lambda item: -item[1].total):
        mine = (stats.calls, stats.total / 1000, (stats.self_total or 0) / 1000)
        theirs = torch_ops.get(name)
        if theirs is None:
            print(f"  only in profilectl: {name} {mine}")
            differences += 1
            continue
        expected = (theirs["count"], theirs["cpu_total_us"], theirs["self_cpu_us"])
        # times: the trace keeps 3 decimals of microseconds; allow 1 ns per call
        close = mine[0] == expected[0] and all(abs(a - b) <= 0.001 * mine[0] + 1e-6 for a, b in zip(mine[1:], expected[1:]))
        if not close:
            differences += 1
        print(f"  {'ok  ' if close else 'DIFF'} {name[:60]:<60} calls {mine[0]:>6} / {expected[0]:>6}  "
              f"total {mine[1]:>12.3f} / {expected[1]:>12.3f} us  self {mine[2]:>12.3f} / {expected[2]:>12.3f} us")
    print(f"{differences} difference(s)")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
