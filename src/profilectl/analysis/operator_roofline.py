"""Operators on the roofline from a trace alone: no counters, no second run.

A torch trace recorded with shapes (record_shapes=True; `profilectl trace --shapes`) names each
operator's input shapes and dtypes. profiling/operator_flops.yaml turns them into the FLOPs and the
minimum bytes the operator must move (each formula with its source); the GPU time is that of the
kernels the operator's calls launched (formats/torch_shapes.py links them by correlation id). Then,
per operator and signature: achieved FLOP/s and bytes/s, arithmetic intensity (FLOP per minimum
byte), the percent of its compute roof (the pipe and precision its formula and dtype name, from
profiling/peaks.yaml) and of the HBM roof, and a verdict by the roofline's one rule
(analysis/roofline.py verdict_of). The minimum bytes make the HBM percent a lower bound: a kernel
that moves more than the compulsory traffic is more memory-bound than it shows here.

Where a counter-based roofline of the same kernels exists (counters --set roofline), each operator
shows the counters' FLOP/s and verdict for its heaviest kernel beside its own: the counters stay the
reference.
"""

from __future__ import annotations

import ast
import functools
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from profilectl import data
from profilectl.analysis import roofline
from profilectl.analysis.formulas import FormulaError, Tensor, evaluate
from profilectl.model.operators import OperatorShape

FILE = "operator_flops.yaml"
MAX_TEXT = 2_000  # a Concrete Inputs value longer than this is not parsed (a huge list is no parameter)


@functools.lru_cache(maxsize=1)
def formulas() -> dict[str, Any]:
    doc = data.load_mapping(FILE)
    return {"dtypes": dict(doc.get("dtypes") or {}), "operators": dict(doc.get("operators") or {}),
            "tf32_kernel_words": tuple(doc.get("tf32_kernel_words") or ())}


def concrete_value(text: str) -> Any:
    """A "Concrete Inputs" entry: "" or "None" -> None, "True"/"False" -> 1/0, numbers, lists as
    tuples; other text (gelu's "tanh") stays text."""
    text = (text or "").strip()
    if not text or text == "None" or len(text) > MAX_TEXT:
        return None
    if text in ("True", "False"):
        return int(text == "True")
    try:
        value = ast.literal_eval(text.replace("True", "1").replace("False", "0"))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text
    if isinstance(value, list):
        return tuple(value)
    return value if isinstance(value, (int, float, tuple)) and not isinstance(value, bool) else text


def arguments(spec: Mapping[str, Any], row: OperatorShape) -> dict[str, Any]:
    """The operator's arguments by their names in the data: tensors as shapes with their element
    size, scalars and lists from "Concrete Inputs", None where absent or not recorded."""
    dtypes = formulas()["dtypes"]
    bound: dict[str, Any] = {}
    for i, name in enumerate(spec.get("inputs") or ()):
        kind = row.input_types[i] if i < len(row.input_types) else ""
        dims = row.input_dims[i] if i < len(row.input_dims) else ()
        text = row.concrete[i] if i < len(row.concrete) else ""
        dtype = dtypes.get(kind)
        if dtype is not None and kind != "Scalar" and all(isinstance(d, int) for d in dims):
            bound[name] = Tensor(dims, float(dtype.get("bytes") or 0))
        else:
            bound[name] = concrete_value(text)
    return bound


# ------------------------------------------------------------------ per operator
@dataclass(frozen=True)
class OperatorWork:
    """One operator with one signature, all ranks together, and what its shapes say it computes."""
    name: str
    kind: str  # gemm, conv, attention, softmax, norm, elementwise, copy
    signature: str  # "[8944, 1024] x [1024, 1024] (BFloat16)": the tensor shapes and the first dtype
    precision: str | None  # of its first tensor input: bf16, fp32, ...
    pipe: str  # matrix or vector
    ranks: int
    calls: int
    cpu_ns: int
    gpu_ns: int
    launches: int
    flop: float | None  # all calls; None: no formula applies (error says why)
    bytes: float | None
    kernels: tuple[tuple[str, int], ...]
    source: str
    error: str | None = None


@dataclass(frozen=True)
class OperatorRoofline:
    """An operator placed under the roofs of its GPU (the roofline's rule, roofline.verdict_of)."""
    work: OperatorWork
    flop_per_s: float | None
    bytes_per_s: float | None
    intensity: float | None  # FLOP per minimum byte
    roof: str | None  # the compute roof it is held to: matrix_bf16, vector_fp32, ...
    compute_percent: float | None
    hbm_percent: float | None  # a lower bound (minimum bytes)
    roof_percent: float | None  # max(compute %, HBM %): of the roof at its intensity
    verdict: str  # memory-bound, compute-bound, latency-bound, unknown
    bound_by: str | None
    share_percent: float  # of the GPU time of every modelled operator
    counter_kernel: str | None = None  # its heaviest kernel, where a counter-based roofline has it
    counter_flop_per_s: float | None = None
    counter_verdict: str | None = None


@dataclass(frozen=True)
class OperatorRooflineResult:
    """The operator roofline of a trace recorded with shapes: each modelled operator under the roofs, heaviest first,
    and the calls not placed."""
    operators: tuple[OperatorRoofline, ...]  # heaviest GPU time first
    roofs: tuple[roofline.Roof, ...]
    gpu: str | None
    peaks_source: str
    latency_percent: float
    unmodelled: tuple[OperatorWork, ...]  # a formula exists but did not apply (error says why)
    no_gpu: int  # calls with a formula that launched no kernel (CPU work, or a copy from the host)
    notes: tuple[str, ...] = ()


def _shape_text(dims: Any) -> str:
    return "[" + ", ".join(_shape_text(d) if isinstance(d, (tuple, list)) else str(d) for d in dims) + "]"


def signature(row: OperatorShape) -> str:
    """The tensor arguments' shapes and the first dtype, as people read them."""
    dtypes = formulas()["dtypes"]
    shapes = [_shape_text(d) for d, t in zip(row.input_dims, row.input_types) if t in dtypes and t != "Scalar"
              and d]
    first = next((t for t in row.input_types if t in dtypes and t != "Scalar"), "")
    text = " x ".join(shapes) or "scalars"
    return f"{text} ({first.replace('c10::', '')})" if first else text


def work_of(row: OperatorShape) -> tuple[float, float, str | None]:
    """FLOP and bytes of one call: (flop, bytes, None), or (nan, nan, why not)."""
    spec = formulas()["operators"].get(row.name)
    if spec is None:
        return math.nan, math.nan, "no formula"
    names = arguments(spec, row)
    try:
        for name, expression in (spec.get("let") or {}).items():
            names[name] = evaluate(expression, names)
        flop, moved = evaluate(spec.get("flop", 0), names), evaluate(spec.get("bytes", 0), names)
    except FormulaError as exc:
        return math.nan, math.nan, str(exc)
    if not all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in (flop, moved)):
        return math.nan, math.nan, f"the formula gave {flop!r} FLOP and {moved!r} bytes"
    return float(flop), float(moved), None


def works(rows: Sequence[OperatorShape]) -> tuple[OperatorWork, ...]:
    """Rows of every rank with the same operator and signature together, heaviest GPU time first."""
    groups: dict[tuple[Any, ...], list[OperatorShape]] = {}
    for row in rows:
        groups.setdefault((row.name, row.input_dims, row.input_types, row.concrete), []).append(row)
    dtypes = formulas()["dtypes"]
    out = []
    for (name, dims, types, _), members in groups.items():
        spec = formulas()["operators"].get(name) or {}
        flop, moved, error = work_of(members[0])
        calls = sum(m.calls for m in members)
        first = next((t for t in types if t in dtypes and t != "Scalar"), None)
        kernels: dict[str, int] = {}
        for m in members:
            for kernel, ns in m.kernels:
                kernels[kernel] = kernels.get(kernel, 0) + ns
        out.append(OperatorWork(
            name=name, kind=str(spec.get("kind", "")), signature=signature(members[0]),
            precision=dtypes[first].get("precision") if first else None, pipe=str(spec.get("pipe", "vector")),
            ranks=len({m.rank for m in members}), calls=calls, cpu_ns=sum(m.cpu_ns for m in members),
            gpu_ns=sum(m.gpu_ns for m in members), launches=sum(m.launches for m in members),
            flop=None if error else flop * calls, bytes=None if error else moved * calls,
            kernels=tuple(sorted(kernels.items(), key=lambda item: -item[1])), source=str(spec.get("source", "")),
            error=error))
    out.sort(key=lambda w: (-w.gpu_ns, -(w.flop or 0.0)))
    return tuple(out)


def compute_roof(work: OperatorWork, roofs: Mapping[str, roofline.Roof]) -> str | None:
    """The compute roof its pipe and precision name, where the GPU has one: a matrix pipe without
    that precision (NVIDIA has no FP32 tensor-core roof) falls to the vector pipe; an FP32 GEMM whose
    kernel is a TF32 one (tf32_kernel_words) is held to the TF32 matrix roof."""
    precision = work.precision or "fp32"
    if precision == "fp32" and work.pipe == "matrix" and any(
            word in kernel.lower() for kernel, _ in work.kernels for word in formulas()["tf32_kernel_words"]):
        precision = "tf32"
    for name in (f"{work.pipe}_{precision}", f"vector_{precision}", "vector_fp32"):
        if name in roofs and roofs[name].kind == "compute":
            return name
    return None


def place(works_: Sequence[OperatorWork], vendor: str | None, arch: str | None, gpu_name: str | None,
          counters: "roofline.RooflineResult | None" = None) -> OperatorRooflineResult:
    """Each operator with GPU time and FLOPs under its GPU's roofs (profiling/peaks.yaml)."""
    roofs, sources, sheet = roofline.roofs_for((), vendor, arch, gpu_name)
    by_name = {r.name: r for r in roofs}
    latency = float(roofline.rules().get("latency_percent", 60))
    placed_works = [w for w in works_ if w.error is None and w.gpu_ns > 0]
    total = sum(w.gpu_ns for w in placed_works) or 1
    by_kernel = {k.kernel: k for k in (counters.kernels if counters else ())}
    placed = []
    for work in placed_works:
        seconds = work.gpu_ns / 1e9
        flop_per_s = (work.flop or 0.0) / seconds
        bytes_per_s = (work.bytes or 0.0) / seconds
        roof = compute_roof(work, by_name)
        utilisation: dict[str, float] = {}
        if roof is not None and work.flop:
            utilisation[roof] = 100.0 * flop_per_s / by_name[roof].value
        if "hbm" in by_name and work.bytes:
            utilisation["hbm"] = 100.0 * bytes_per_s / by_name["hbm"].value
        verdict, bound_by = roofline.verdict_of(utilisation, ("hbm",), latency) if utilisation else ("unknown", None)
        heaviest = next((name for name, _ in work.kernels if name in by_kernel), None)
        counted = by_kernel.get(heaviest) if heaviest else None
        placed.append(OperatorRoofline(
            work=work, flop_per_s=flop_per_s if work.flop else None, bytes_per_s=bytes_per_s if work.bytes else None,
            intensity=work.flop / work.bytes if work.flop and work.bytes else None, roof=roof,
            compute_percent=utilisation.get(roof) if roof else None, hbm_percent=utilisation.get("hbm"),
            roof_percent=max(utilisation.values()) if utilisation else None, verdict=verdict, bound_by=bound_by,
            share_percent=100.0 * work.gpu_ns / total, counter_kernel=heaviest,
            counter_flop_per_s=counted.flop_per_s if counted else None,
            counter_verdict=counted.verdict if counted else None))
    notes = []
    if not roofs:
        notes.append(f"no peaks known for {gpu_name or arch or 'this GPU'}: FLOP/s and bytes/s without a roof "
                     "(profiling/peaks.yaml)")
    if sheet and sheet.get("assumed"):
        notes.append(f"peaks of {sheet.get('product')} assumed for {gpu_name or arch}: no product in "
                     "profiling/peaks.yaml matched the GPU name")
    return OperatorRooflineResult(
        operators=tuple(placed), roofs=roofs, gpu=str(sheet.get("product")) if sheet else gpu_name,
        peaks_source=sources, latency_percent=latency,
        unmodelled=tuple(w for w in works_ if w.error is not None),
        no_gpu=sum(w.calls for w in works_ if w.error is None and w.gpu_ns == 0), notes=tuple(notes))


def analyse(rows: Sequence[OperatorShape], gpu_text: str | None,
            counters: "roofline.RooflineResult | None" = None) -> OperatorRooflineResult | None:
    """None where the trace recorded no operator this data has a formula for."""
    if not rows:
        return None
    arch = roofline.arch_of(gpu_text)
    vendor = "amd" if arch and arch.startswith("gfx") else "nvidia" if arch else None
    return place(works(rows), vendor, arch, gpu_text, counters)
