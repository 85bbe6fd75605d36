#!/usr/bin/env python3
"""The comparisons of bench/nvidia_trace_knows.sh (issue 37), each printed as one `CHECK <name>: PASS|FAIL ...`
line with its figures:

  knows_check.py gemm TRACE_RUN COUNTERS_RUN LOG   operators' FLOP and FLOP/s from shapes against Nsight
                                                   Compute's roofline counters on the same launches (10 %)
  knows_check.py memory RUN LOG                    the replayed peak against torch.cuda.max_memory_allocated()
  knows_check.py oom RUN LOG                       the failed allocation named, with what was alive
  knows_check.py collectives RUN LOG               each collective's size against what the script sent, and
                                                   the sleeping rank named last
  knows_check.py html RUN OUT.html                 the report's HTML (the charts), for a screenshot

RUN: a run directory of `profilectl trace`; LOG: the workload's output (its KNOWS_* lines).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

TOLERANCE = 0.10


def lines(log: str, tag: str) -> list[str]:
    return [line.split(tag, 1)[1].strip() for line in Path(log).read_text(errors="replace").splitlines() if tag in line]


def summary_of(run: str):
    from profilectl.read.load import load
    return load(Path(run))


def check(name: str, ok: bool, words: str) -> bool:
    print(f"CHECK {name}: {'PASS' if ok else 'FAIL'} {words}", flush=True)
    return ok


def base_name(kernel: str) -> str:
    """A kernel's name as both tools agree on it: no `void `, no template or argument list."""
    return re.sub(r"^void ", "", kernel).split("(")[0].split("<")[0].strip()


def gemm(trace_run: str, counters_run: str, log: str) -> bool:
    from profilectl.analysis import roofline
    from profilectl.report.sections.operator_roofline import result_of
    expected = {d["operator"]: d for d in map(json.loads, lines(log, "KNOWS_GEMM"))}
    traced = result_of(summary_of(trace_run))
    counted = roofline.analyse(summary_of(counters_run))
    if traced is None or counted is None:
        return check("gemm", False, f"no operator roofline ({traced is None}) or no counter roofline ({counted is None})")
    by_kernel = {base_name(k.kernel): k for k in counted.kernels}
    ok = True
    # operators grouped by the kernel they launch: cuBLAS may pick one kernel for two operators (aten::mm and
    # aten::bmm both ran nvjet_..._NNT on an H200), and ncu's figures for that kernel are over all its launches
    sharing: dict[str, list] = {}
    for op in traced.operators:
        work = op.work
        if work.name not in expected or not work.kernels:
            continue
        want = expected[work.name]
        per_call = (work.flop or 0) / work.calls
        ok &= check(f"gemm-flop-from-shapes {work.name}", per_call == want["flop_per_call"],
                    f"{per_call:.6g} FLOP per call from the trace's shapes, the script computed {want['flop_per_call']:.6g}")
        sharing.setdefault(base_name(work.kernels[0][0]), []).append(op)
    for kernel, ops in sorted(sharing.items()):
        names = "+".join(op.work.name for op in ops)
        counters = by_kernel.get(kernel)
        if counters is None:
            ok &= check(f"gemm-vs-ncu {names}", False, f"kernel {kernel} not among ncu's: {sorted(by_kernel)[:6]}")
            continue
        # the same kernel's launches in both runs (one launch of the heaviest kernel per call): FLOP per launch,
        # and FLOP/s (trace: the calls' kernel time in the trace; ncu: the replay's own duration, clocks left free)
        shapes_flop = sum(op.work.flop or 0 for op in ops)
        launches = sum(op.work.calls for op in ops)
        shapes_seconds = sum((op.work.flop or 0) / op.flop_per_s for op in ops if op.flop_per_s)
        flop_ratio = (shapes_flop / launches) / (counters.flop / counters.calls) if counters.flop else float("inf")
        rate = shapes_flop / shapes_seconds if shapes_seconds else 0.0
        rate_ratio = rate / counters.flop_per_s if counters.flop_per_s else float("inf")
        ok &= check(f"gemm-vs-ncu {names}", abs(rate_ratio - 1) <= TOLERANCE and abs(flop_ratio - 1) <= TOLERANCE,
                    f"kernel {kernel[:70]}, {launches} launches in the trace, {counters.calls} under ncu: FLOP per "
                    f"launch shapes {shapes_flop / launches:.6g} / ncu {counters.flop / counters.calls:.6g} = "
                    f"{flop_ratio:.3f}; FLOP/s shapes {rate / 1e12:.1f} T (trace time) / ncu "
                    f"{counters.flop_per_s / 1e12:.1f} T = {rate_ratio:.3f} (within {TOLERANCE:.0%}?); verdicts "
                    f"{'/'.join(op.verdict for op in ops)} / {counters.verdict}")
    missing = set(expected) - {op.work.name for op in traced.operators}
    if missing:
        ok &= check("gemm-operators", False, f"not in the operator roofline: {sorted(missing)}")
    return ok


def memory(run: str, log: str) -> bool:
    truth = int(lines(log, "KNOWS_MAX_ALLOCATED")[-1])
    reports = summary_of(run).memory
    if not reports:
        return check("memory-peak", False, "no memory report (no snapshot read)")
    report = max(reports, key=lambda r: r.peak_allocated)
    shares = ", ".join(f"{s.category} {s.bytes / 2**20:.0f} MiB" for s in report.by_category)
    ok = check("memory-peak", report.peak_allocated == truth,
               f"replayed peak {report.peak_allocated:,} B; torch.cuda.max_memory_allocated() {truth:,} B; "
               f"the hook's own reading {report.torch_max_allocated}; held by: {shares}")
    return ok and check("memory-categories", {"parameters", "optimizer state"} <= {s.category for s in report.by_category},
                        f"categories at the peak: {[s.category for s in report.by_category]}")


def oom(run: str, log: str) -> bool:
    asked = int(lines(log, "KNOWS_OOM_ASKED")[-1])
    failed = [r for r in summary_of(run).memory if r.failure is not None]
    if not failed:
        return check("oom", False, "no out-of-memory failure in any memory report")
    failure = failed[0].failure
    largest = "; ".join(f"{a.bytes / 2**20:.0f} MiB {a.category} by {a.made_by or '?'}" for a in failure.largest[:4])
    return check("oom", abs(failure.requested - asked) <= 2 << 20 and "knows_memory.py" in failure.requested_by,
                 f"asked {asked:,} B, the report's failed allocation {failure.requested:,} B at {failure.requested_by!r} "
                 f"({failure.allocated:,} B allocated, {failure.reserved:,} B reserved; largest alive: {largest}); "
                 f"from {failed[0].source}")


def collectives(run: str, log: str) -> bool:
    sent = [json.loads(s) for s in lines(log, "KNOWS_SENT")]
    result = summary_of(run).collective_calls
    if result is None:
        return check("collectives", False, "no collective in the trace")
    ok = True
    for want in sent:
        rows = [c for c in result.calls if c.kind == want["kind"]]
        sizes = sorted({c.bytes for c in rows})
        ok &= check(f"collective-size {want['kind']}", sizes == [want["bytes"]] and
                    len(rows) == want["calls"] * want["ranks"] and {c.dtype for c in rows} == {want["dtype"]},
                    f"sent {want['calls']} x {want['bytes']:,} B {want['dtype']} on {want['ranks']} ranks; the report: "
                    f"{len(rows)} calls of {sizes} B, dtypes {sorted({str(c.dtype) for c in rows})}, sides "
                    f"{sorted({c.side for c in rows})}, busbw median "
                    f"{sorted(c.busbw or 0 for c in rows)[len(rows) // 2] / 1e9 if rows else 0:.2f} GB/s")
    if sent:
        slow = sent[0]["slow_rank"]
        top = max(result.last_arrivals, key=lambda a: a.lag_ns, default=None)
        ok &= check("collective-last-arrival", top is not None and top.rank == slow,
                    f"the script's sleeping rank {slow}; the report's most often last: "
                    + (f"rank {top.rank}, last at {top.last} of {top.calls} matched calls, median lag "
                       f"{(top.median_lag_ns or 0) / 1e6:.2f} ms" if top else "none")
                    + f"; matched by {sorted({m.matched_by for m in result.matched})}; clock: {result.clock}")
    return ok


def html(run: str, out: str) -> bool:
    from profilectl.report.renderers import html as renderer
    from profilectl.report.sections import build_document
    page = renderer.render(build_document(summary_of(run)))
    Path(out).write_text(page)
    return check("html", "<svg" in page, f"{out}: {page.count('<svg')} chart(s)")


if __name__ == "__main__":
    command, *rest = sys.argv[1:]
    done = {"gemm": gemm, "memory": memory, "oom": oom, "collectives": collectives, "html": html}[command](*rest)
    sys.exit(0 if done else 1)
