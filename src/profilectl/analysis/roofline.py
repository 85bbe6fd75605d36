"""What limits each kernel: its place under the roofline, for AMD and NVIDIA alike.

Input: the per-kernel counter rows of a `counters --set roofline` run (profiling/counters/roofline.yaml
turns each tool's counters into the same derived columns: flop_<pipe>_<precision>, bytes_hbm,
bytes_l2, bytes_lds, and on NVIDIA the device's own peaks peak_*), the kernels' GPU time, and peaks:
measured by the tool at the replay's clocks (Nsight Compute), measured empirically on this machine
(rocprofiler-compute's roofline benchmark, roofline.csv, cached per machine), or the vendor's
datasheet (profiling/peaks.yaml), in that order of preference; each roof says which it is.

Per kernel: achieved FLOP/s (all precisions, and by precision), bandwidth at each level, arithmetic
intensity (FLOP per HBM byte and per L2 byte), utilisation of each roof, percent of the roof at its
intensity, and a verdict with the one number that carries it:
  memory-bound   its best utilisation is a bandwidth roof (HBM or L2), at or above the latency line
  compute-bound  its best utilisation is the compute roof of its main precision
  latency-bound  under both roofs: every utilisation is below the latency line (profiling/
                 roofline_rules.yaml, Nsight Compute's 60 %): occupancy and waves are shown beside
  unknown        no peak is known for this GPU
Ordered by the kernel's share of GPU time. Rules and thresholds are data (roofline_rules.yaml).
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import math
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Collection, Mapping, Sequence

from profilectl import data
from profilectl.model.units import si

WORK_PREFIXES = ("flop_", "iop_")
LEVELS = ("hbm", "l2", "lds")
VERDICTS = ("memory-bound", "compute-bound", "latency-bound", "unknown")
SOL_COMPUTE, SOL_MEMORY = "sol_compute", "sol_memory"  # the SpeedOfLight section's two roofs


@dataclass(frozen=True)
class Roof:
    """One ceiling: a pipe's peak (flop/s, iop/s) or a level's peak bandwidth (bytes/s)."""
    name: str  # "matrix_bf16", "vector_fp32", "hbm", "l2"
    label: str  # "BF16 matrix", "HBM"
    kind: str  # "compute" or "bandwidth"
    value: float
    unit: str  # "flop_per_s", "iop_per_s", "bytes_per_s"
    source: str  # "measured: Nsight Compute ...", "datasheet: ...", "empirical: roofline.csv ..."
    datasheet: float | None = None  # the datasheet's value beside a measured one


@dataclass(frozen=True)
class KernelRoofline:
    """One kernel under the roofline: its work, bytes and rates, intensity, share of each roof, and the verdict with
    the number that carries it."""
    kernel: str
    calls: int
    total_ns: float
    share_percent: float  # of the GPU time of every kernel of the run
    flop: float  # all precisions and pipes (integer matrix ops excluded)
    work: tuple[tuple[str, float], ...]  # (pipe_precision, operations), largest first, zeros left out
    main_precision: str | None  # the pipe_precision with the most operations
    flop_per_s: float
    bytes: tuple[tuple[str, float], ...]  # (level, bytes) for hbm, l2, lds where counted
    bytes_per_s: tuple[tuple[str, float], ...]
    intensity_hbm: float | None  # FLOP per HBM byte
    intensity_l2: float | None
    compute_peak: float | None  # of the main precision's pipe
    compute_percent: float | None
    bandwidth_percent: tuple[tuple[str, float], ...]  # (level, percent of its peak)
    roof_percent: float | None  # of the HBM roof at this intensity = max(compute %, HBM %)
    verdict: str
    bound_by: str | None  # the roof that carries the verdict: "hbm", "l2", "matrix_bf16", ...
    carrying: str  # the one number, in words
    occupancy_percent: float | None = None
    waves: float | None = None  # per SM (NVIDIA) or wavefronts per CU (AMD)

    def bytes_at(self, level: str) -> float | None:
        return dict(self.bytes).get(level)

    def rate_at(self, level: str) -> float | None:
        return dict(self.bytes_per_s).get(level)

    def percent_at(self, level: str) -> float | None:
        return dict(self.bandwidth_percent).get(level)


@dataclass(frozen=True)
class RooflineResult:
    """The roofline of a counters run: each kernel's place under it, heaviest first, and the roofs (peaks) used, with
    where they come from."""
    kernels: tuple[KernelRoofline, ...]  # heaviest share of GPU time first
    roofs: tuple[Roof, ...]
    gpu: str | None = None  # the product the peaks are for, as known
    arch: str | None = None
    peaks_source: str = ""  # where the roofs used for verdicts come from, in words
    latency_percent: float = 60.0
    notes: tuple[str, ...] = ()

    def roof(self, name: str) -> Roof | None:
        return next((r for r in self.roofs if r.name == name), None)


@dataclass(frozen=True)
class KernelMove:
    """One kernel between two runs: how its place under the roofline changed."""
    kernel: str
    verdict_before: str | None
    verdict_after: str | None
    flop_per_s_before: float | None
    flop_per_s_after: float | None
    intensity_before: float | None
    intensity_after: float | None
    roof_percent_before: float | None
    roof_percent_after: float | None
    total_ns_before: float | None
    total_ns_after: float | None
    moved: bool
    sentence: str


# ------------------------------------------------------------------ data
@functools.lru_cache(maxsize=1)
def rules() -> dict[str, Any]:
    return data.load_mapping("roofline_rules.yaml")


def label(name: str) -> str:
    return str((rules().get("labels") or {}).get(name, name))


@functools.lru_cache(maxsize=1)
def _peaks_doc() -> dict[str, Any]:
    return data.load_mapping("peaks.yaml")


def datasheet(vendor: str | None, arch: str | None, gpu_name: str | None) -> dict[str, Any] | None:
    """The peaks.yaml entry for this GPU: by architecture, then the product whose `match` is in the
    GPU's name; the first product of the architecture when none matches (marked 'assumed')."""
    if not arch:
        return None
    vendors = [vendor] if vendor else ["amd", "nvidia"]
    for v in vendors:
        products = (_peaks_doc().get(v) or {}).get(arch)
        if not products:
            continue
        name = (gpu_name or "").lower()
        for product in products:
            if str(product.get("match", "")).lower() in name and product.get("match"):
                return dict(product)
        return {**products[0], "assumed": True}
    return None


def arch_of(gpu_text: str | None) -> str | None:
    """'NVIDIA H200 (sm_90)' -> 'sm_90' (the report metadata's GPU line)."""
    match = re.search(r"\b(gfx[0-9a-f]+|sm_\d+)\b", gpu_text or "")
    return match.group(1) if match else None


# ------------------------------------------------------------------ empirical peaks (AMD)
EMPIRICAL_COLUMNS = {  # rocprofiler-compute roofline.csv column -> roof name (GB/s and GFLOP/s in the file)
    "HBMBw": "hbm", "L2Bw": "l2", "L1Bw": "l1", "LDSBw": "lds", "FP32Flops": "vector_fp32",
    "FP64Flops": "vector_fp64", "MFMAF16Flops": "matrix_fp16", "MFMABF16Flops": "matrix_bf16",
    "MFMAF32Flops": "matrix_fp32", "MFMAF64Flops": "matrix_fp64", "MFMAF8Flops": "matrix_fp8",
    "MFMAI8Ops": "matrix_int8"}


def read_empirical(path: Path, device: int = 0) -> dict[str, float]:
    """Peaks measured by rocprofiler-compute's roofline benchmark on one machine (its roofline.csv:
    one row per device, bandwidths in GB/s, rates in GFLOP/s or GOP/s), in bytes/s and flop/s."""
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            if str(row.get("device", "")).strip() != str(device):
                continue
            peaks = {}
            for column, name in EMPIRICAL_COLUMNS.items():
                try:
                    peaks[name] = float(row[column]) * 1e9
                except (KeyError, TypeError, ValueError):
                    continue
            return peaks
    return {}


def empirical_cache(host: str, arch: str, device: int = 0, root: Path | None = None) -> Path:
    """Where a machine's measured peaks are kept: one roofline.csv per host, architecture and device
    ($XDG_CACHE_HOME/profilectl/peaks/<host>-<arch>-gpu<N>.roofline.csv). Measuring is optional and
    done once per machine by rocprofiler-compute's roofline benchmark (`rocprof-compute profile
    --roof-only` writes roofline.csv beside its workload); a report of a run on that host then uses
    it instead of the datasheet, and says so in each roof's source."""
    import os
    base = root or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "profilectl" / "peaks"
    return base / f"{host}-{arch}-gpu{device}.roofline.csv"


# ------------------------------------------------------------------ analysis
def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _pipe(column: str) -> str:
    """'flop_matrix_bf16' -> 'matrix_bf16'; 'iop_matrix_int8' -> 'matrix_int8'."""
    return column.split("_", 1)[1]


def measured_roofs(rows: Sequence[Mapping[str, Any]], tool: str = "Nsight Compute") -> dict[str, float]:
    """The device's peaks the tool reported (peak_* columns), the median over kernels (they differ only
    by the clock each replay ran at)."""
    found: dict[str, list[float]] = {}
    for row in rows:
        for column, value in row.items():
            number = _number(value)
            if column.startswith("peak_") and number and number > 0:
                name = re.sub(r"^peak_(flop|iop|bytes)_per_s_", "", column)
                found.setdefault(name, []).append(number)
    return {name: statistics.median(values) for name, values in found.items()}


def roofs_for(rows: Sequence[Mapping[str, Any]], vendor: str | None, arch: str | None, gpu_name: str | None,
              empirical: Mapping[str, float] | None = None) -> tuple[tuple[Roof, ...], str, dict[str, Any] | None]:
    """Every roof known for this GPU, each from the best source: measured by the tool, empirical,
    datasheet; with the datasheet's value beside a measured one."""
    sheet = datasheet(vendor, arch, gpu_name)
    sheet_values: dict[str, float] = {}
    if sheet:
        for group in ("flop_per_s", "iop_per_s", "bytes_per_s"):
            for name, value in (sheet.get(group) or {}).items():
                try:  # YAML 1.1 reads 989.4e12 (no sign in the exponent) as text
                    number = float(value) if value is not None else None
                except (TypeError, ValueError):
                    raise ValueError(f"profiling/peaks.yaml: {arch} {group}.{name} is not a number: {value!r}") from None
                if number:
                    sheet_values[name] = number
    measured = measured_roofs(rows)
    sheet_words = (f"datasheet: {sheet.get('product')}" + (" (assumed: no product matched the GPU name)"
                                                          if sheet.get("assumed") else "")) if sheet else ""
    roofs = []
    for name in sorted(set(sheet_values) | set(measured) | set(empirical or {})):
        bandwidth = name in LEVELS or name == "l1"
        unit = "bytes_per_s" if bandwidth else "iop_per_s" if name.endswith("int8") else "flop_per_s"
        if name in measured:
            value, source = measured[name], "measured: Nsight Compute peak_sustained x clock of the replay"
        elif empirical and name in empirical:
            value, source = empirical[name], "empirical: rocprofiler-compute roofline benchmark on this machine"
        else:
            value, source = sheet_values[name], sheet_words
        roofs.append(Roof(name=name, label=label(name), kind="bandwidth" if bandwidth else "compute", value=value,
                          unit=unit, source=source, datasheet=sheet_values.get(name)))
    kinds = sorted({r.source.split(":")[0] for r in roofs})
    return tuple(roofs), ", ".join(kinds), sheet


def _carrying(verdict: str, bound_by: str | None, kernel: KernelRoofline, roofs: Mapping[str, Roof],
              latency: float) -> str:
    if verdict == "unknown":
        if bound_by and bound_by not in roofs:
            return f"no {label(bound_by)} peak known for this GPU: its compute roof cannot be placed"
        return "no peak known for this GPU"
    assert bound_by is not None
    if verdict == "latency-bound":
        extra = []
        if kernel.occupancy_percent is not None:
            extra.append(f"occupancy {kernel.occupancy_percent:.0f} %")
        if kernel.waves is not None:
            extra.append(f"{kernel.waves:.2f} waves")
        return (f"best roof use {label(bound_by)} {kernel_percent(kernel, bound_by):.0f} % of peak "
                f"(< {latency:.0f} % on every roof)" + (f"; {', '.join(extra)}" if extra else ""))
    roof = roofs[bound_by]
    if roof.kind == "compute":  # the main precision's own rate against its pipe's peak
        achieved = dict(kernel.work).get(bound_by, 0.0) / (kernel.total_ns / 1e9) if kernel.total_ns else 0.0
    else:
        achieved = kernel.rate_at(bound_by) or 0.0
    return (f"{roof.label} {rate_text(achieved, roof.unit)} = {kernel_percent(kernel, bound_by):.0f} % of "
            f"{rate_text(roof.value, roof.unit)}")


def rate_text(value: float, unit: str) -> str:
    """1.2e15 flop_per_s -> '1.2 PFLOP/s'; 3.1e12 bytes_per_s -> '3.1 TB/s' (decimal prefixes, as
    datasheets quote them)."""
    return si(value, {"flop_per_s": "FLOP/s", "iop_per_s": "OP/s", "bytes_per_s": "B/s"}.get(unit, unit))


def kernel_percent(kernel: KernelRoofline, roof: str | None) -> float:
    if roof is None:
        return 0.0
    if roof in LEVELS or roof == SOL_MEMORY:
        return kernel.percent_at(roof) or 0.0
    return kernel.compute_percent or 0.0


def analyse_rows(rows: Sequence[Mapping[str, Any]], times: Mapping[str, tuple[int, float]],
                 vendor: str | None = None, arch: str | None = None, gpu_name: str | None = None,
                 empirical: Mapping[str, float] | None = None) -> RooflineResult | None:
    """rows: counters_by_kernel (a `kernel` column, counters, the roofline set's derived columns);
    times: kernel -> (calls, total GPU ns). None when no row has roofline columns."""
    roofline_rows = [r for r in rows if any(k.startswith(WORK_PREFIXES) or k.startswith("bytes_") for k in r)]
    if not roofline_rows:
        return None
    roofs, sources, sheet = roofs_for(roofline_rows, vendor, arch, gpu_name, empirical)
    by_name = {r.name: r for r in roofs}
    latency = float(rules().get("latency_percent", 60))
    grand = sum(total for _, total in times.values()) or 1.0
    kernels = []
    for row in roofline_rows:
        name = str(row.get("kernel", ""))
        calls, total_ns = times.get(name, (0, 0.0))
        if not total_ns:
            duration = _number(row.get("gpu__time_duration.sum"))
            total_ns = duration or 0.0
        kernels.append(_kernel(name, row, calls, total_ns, 100.0 * total_ns / grand, _own_roofs(row, by_name), latency))
    kernels.sort(key=lambda k: -k.total_ns)
    notes = []
    if not roofs:
        notes.append(f"no peaks known for {gpu_name or arch or 'this GPU'}: add it to profiling/peaks.yaml")
    if sheet and sheet.get("assumed"):
        notes.append(f"peaks of {sheet.get('product')} assumed for {gpu_name or arch}: no product in "
                     "profiling/peaks.yaml matched the GPU name")
    if vendor == "amd" and not any(k.flop for k in kernels):
        notes.append("no FLOP counted: RDNA GPUs have no per-precision FLOP counters, so their roofline is "
                     "bandwidth-only")
    product = str(sheet.get("product")) if sheet else gpu_name
    return RooflineResult(kernels=tuple(kernels), roofs=roofs, gpu=product, arch=arch, peaks_source=sources,
                          latency_percent=latency, notes=tuple(notes))


def verdict_of(utilisation: Mapping[str, float], memory_roofs: Collection[str], latency: float) -> tuple[str, str]:
    """The one rule that places a kernel (module docstring; Nsight Compute's SpeedOfLight rule): its
    best utilisation carries the verdict, memory-bound where that roof is a memory one, compute-bound
    otherwise, latency-bound where even the best is below the latency line. `utilisation`: percent
    of each roof's peak, not empty. Returns (verdict, the roof that carries it)."""
    bound_by = max(utilisation, key=lambda k: utilisation[k])
    if utilisation[bound_by] < latency:
        return "latency-bound", bound_by
    return ("memory-bound" if bound_by in memory_roofs else "compute-bound"), bound_by


def speed_of_light_rows(rows: Sequence[Mapping[str, Any]], times: Mapping[str, tuple[int, float]]
                        ) -> RooflineResult | None:
    """Each kernel placed from Nsight Compute's SpeedOfLight section where its counters hold the
    section's throughputs (percent of the device's peaks as ncu measured them: the details page's
    labels, the raw page's metric names; roofline_rules.yaml `speed_of_light`) and not the roofline
    set's work and bytes. The same rule as the roofline (verdict_of) on the same roofs: the compute
    throughput, DRAM (HBM) and L2 as the memory levels, L1/shared left out as the roofline leaves LDS
    out; the section's "Memory Throughput" (the busiest memory unit, L1 and shared included) only
    where neither level is given. None when no row has a compute and a memory throughput."""
    names = rules().get("speed_of_light") or {}
    latency = float(rules().get("latency_percent", 60))

    def first(row: Mapping[str, Any], roof: str) -> float | None:
        return next((v for name in names.get(roof) or () if (v := _number(row.get(name))) is not None), None)
    grand = sum(total for _, total in times.values()) or 1.0
    kernels = []
    for row in rows:
        compute = first(row, "compute")
        memory = {level: v for level in ("hbm", "l2") if (v := first(row, level)) is not None}
        if not memory and (busiest := first(row, "memory")) is not None:
            memory = {SOL_MEMORY: busiest}
        if compute is None or not memory:
            continue
        name = str(row.get("kernel", ""))
        calls, total_ns = times.get(name, (0, 0.0))
        verdict, bound_by = verdict_of({**memory, SOL_COMPUTE: compute}, (*LEVELS, SOL_MEMORY), latency)
        best = max(compute, *memory.values())
        carrying = (f"best roof use {label(bound_by)} {best:.0f} % of peak (< {latency:.0f} % on every roof)"
                    if verdict == "latency-bound" else f"{label(bound_by)} {best:.0f} % of peak (SpeedOfLight)")
        kernels.append(KernelRoofline(
            kernel=name, calls=calls, total_ns=total_ns, share_percent=100.0 * total_ns / grand, flop=0.0, work=(),
            main_precision=None, flop_per_s=0.0, bytes=(), bytes_per_s=(), intensity_hbm=None, intensity_l2=None,
            compute_peak=None, compute_percent=compute, bandwidth_percent=tuple(memory.items()),
            roof_percent=max(compute, memory.get("hbm", memory.get(SOL_MEMORY, 0.0))), verdict=verdict,
            bound_by=bound_by, carrying=carrying, occupancy_percent=_number(row.get("occupancy_percent")),
            waves=_number(row.get("waves_per_sm"))))
    if not kernels:
        return None
    kernels.sort(key=lambda k: -k.total_ns)
    return RooflineResult(kernels=tuple(kernels), roofs=(), peaks_source="measured: Nsight Compute SpeedOfLight",
                          latency_percent=latency,
                          notes=("placed by Nsight Compute's SpeedOfLight throughputs (percent of the device's peaks "
                                 "as ncu measured them); no FLOP or bytes: collect the roofline set (profilectl "
                                 "counters --set roofline) for the roofline itself",))


def _own_roofs(row: Mapping[str, Any], device: Mapping[str, Roof]) -> dict[str, Roof]:
    """The roofs a kernel is measured against: the device's, except where the tool measured peaks
    during this kernel's own replay (Nsight Compute: peak per cycle x this kernel's clock). A kernel
    that slowed the clock (a long GEMM under power limits) is judged at the clock it ran at, as
    Nsight Compute's own percentages are."""
    own = dict(device)
    for name, value in measured_roofs([row]).items():
        if name in own:
            own[name] = dataclasses.replace(own[name], value=value)
    return own


def _kernel(name: str, row: Mapping[str, Any], calls: int, total_ns: float, share: float,
            roofs: Mapping[str, Roof], latency: float) -> KernelRoofline:
    seconds = total_ns / 1e9 if total_ns else 0.0
    work = {_pipe(k): v for k, value in row.items() if k.startswith(WORK_PREFIXES)
            if (v := _number(value)) is not None and v > 0}
    flop = sum(v for k, v in work.items() if not k.endswith("int8"))
    main = max(work, key=lambda k: work[k]) if work else None
    levels = {lvl: v for lvl in LEVELS if (v := _number(row.get(f"bytes_{lvl}"))) is not None}
    rates = {lvl: v / seconds for lvl, v in levels.items() if seconds}
    flop_per_s = flop / seconds if seconds else 0.0
    compute_peak = roofs[main].value if main and main in roofs else None
    main_rate = work[main] / seconds if main and seconds else 0.0
    compute_percent = 100.0 * main_rate / compute_peak if compute_peak else None
    bandwidth = {lvl: 100.0 * rate / roofs[lvl].value for lvl, rate in rates.items() if lvl in roofs}
    hbm_bytes = levels.get("hbm")
    l2_bytes = levels.get("l2")
    candidates = {**{lvl: pct for lvl, pct in bandwidth.items() if lvl != "lds"},
                  **({main: compute_percent} if main and compute_percent is not None else {})}
    bound_by = max(candidates, key=lambda k: candidates[k]) if candidates else None
    compute_unknown = main is not None and compute_percent is None  # FLOP counted, no peak for its pipe
    if bound_by is None or (compute_unknown and candidates[bound_by] < latency):
        verdict, bound_by = "unknown", main if compute_unknown else bound_by
    else:
        verdict, bound_by = verdict_of(candidates, LEVELS, latency)
    hbm_percent = bandwidth.get("hbm")
    roof_percent = max((p for p in (compute_percent, hbm_percent) if p is not None), default=None)
    kernel = KernelRoofline(
        kernel=name, calls=calls, total_ns=total_ns, share_percent=share, flop=flop,
        work=tuple(sorted(work.items(), key=lambda item: -item[1])), main_precision=main, flop_per_s=flop_per_s,
        bytes=tuple(levels.items()), bytes_per_s=tuple(rates.items()),
        intensity_hbm=flop / hbm_bytes if hbm_bytes else None, intensity_l2=flop / l2_bytes if l2_bytes else None,
        compute_peak=compute_peak, compute_percent=compute_percent, bandwidth_percent=tuple(bandwidth.items()),
        roof_percent=roof_percent, verdict=verdict, bound_by=bound_by, carrying="",
        occupancy_percent=_number(row.get("occupancy_percent")),
        waves=_number(row.get("waves_per_sm", row.get("waves_per_cu"))))
    return dataclasses.replace(kernel, carrying=_carrying(verdict, bound_by, kernel, roofs, latency))


def analyse(summary: Any, empirical: Mapping[str, float] | None = None) -> RooflineResult | None:
    """The roofline of a Summary's counter rows (None unless the roofline set, or counters with the
    same derived columns, was collected). The GPU comes from the summary's metadata when known."""
    gpu_text = summary.metadata.gpu if getattr(summary, "metadata", None) else None
    arch = arch_of(gpu_text)
    vendor = "amd" if arch and arch.startswith("gfx") else "nvidia" if arch else None
    times = {k.name: (k.calls, k.total_ns) for k in summary.kernels}
    host = summary.metadata.host if getattr(summary, "metadata", None) else None
    if empirical is None and vendor == "amd" and arch and host:
        cached = empirical_cache(host, arch)
        if cached.is_file():  # this machine's measured peaks win over the datasheet's
            empirical = read_empirical(cached)
    return analyse_rows(summary.counters_by_kernel, times, vendor=vendor, arch=arch, gpu_name=gpu_text,
                        empirical=empirical)


# ------------------------------------------------------------------ compare
def _relative_change(before: float | None, after: float | None) -> float:
    if before is None or after is None:
        return 0.0 if before == after else math.inf
    if before == 0:
        return 0.0 if after == 0 else math.inf
    return 100.0 * abs(after - before) / abs(before)


def compare(before: RooflineResult | None, after: RooflineResult | None,
            key: Any = None) -> tuple[KernelMove, ...]:
    """Each kernel's movement between two runs, heaviest (in either run) first: verdict, FLOP/s,
    intensity and percent of roof before and after; `moved` when the verdict changed or FLOP/s or
    percent of roof changed by more than compare_move_percent. `key` canonicalises kernel names."""
    spell = key or (lambda name: name)
    a = {spell(k.kernel): k for k in (before.kernels if before else ())}
    b = {spell(k.kernel): k for k in (after.kernels if after else ())}
    limit = float(rules().get("compare_move_percent", 10))
    moves = []
    for name in sorted(set(a) | set(b), key=lambda n: -max(a[n].total_ns if n in a else 0.0,
                                                             b[n].total_ns if n in b else 0.0)):
        x, y = a.get(name), b.get(name)
        changed_verdict = (x.verdict if x else None) != (y.verdict if y else None)
        flop_change = _relative_change(x.flop_per_s if x else None, y.flop_per_s if y else None)
        roof_change = _relative_change(x.roof_percent if x else None, y.roof_percent if y else None)
        moved = changed_verdict or flop_change > limit or roof_change > limit
        if x is None or y is None:
            sentence = f"only in the {'second' if x is None else 'first'} run"
        else:
            parts = [f"{x.verdict} -> {y.verdict}" if changed_verdict else y.verdict]
            if x.roof_percent is not None and y.roof_percent is not None:
                parts.append(f"roof {x.roof_percent:.0f} % -> {y.roof_percent:.0f} %")
            if x.intensity_hbm is not None and y.intensity_hbm is not None:
                parts.append(f"intensity {x.intensity_hbm:.3g} -> {y.intensity_hbm:.3g} FLOP/B")
            parts.append(f"time {x.total_ns / 1e6:.3f} -> {y.total_ns / 1e6:.3f} ms")
            sentence = "; ".join(parts)
        moves.append(KernelMove(
            kernel=(y or x).kernel if (y or x) else name,  # type: ignore[union-attr]
            verdict_before=x.verdict if x else None, verdict_after=y.verdict if y else None,
            flop_per_s_before=x.flop_per_s if x else None, flop_per_s_after=y.flop_per_s if y else None,
            intensity_before=x.intensity_hbm if x else None, intensity_after=y.intensity_hbm if y else None,
            roof_percent_before=x.roof_percent if x else None, roof_percent_after=y.roof_percent if y else None,
            total_ns_before=x.total_ns if x else None, total_ns_after=y.total_ns if y else None,
            moved=moved, sentence=sentence))
    return tuple(moves)


def share_by_verdict(result: RooflineResult) -> dict[str, float]:
    """Share of GPU time per verdict (percent)."""
    shares: dict[str, float] = {}
    for kernel in result.kernels:
        shares[kernel.verdict] = shares.get(kernel.verdict, 0.0) + kernel.share_percent
    return shares


def workload_placement(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """rocprof-compute's speed-of-light of the whole workload (its counters row), placed by the
    roofline's one rule (verdict_of) on its roofs (profiling/tools/rocprof-compute.yaml
    `speed_of_light`: the busiest compute pipe, HBM read + write, L2), as a sentence."""
    if not rows:  # no counters (a trace's report): rocprof-compute's facts are not even imported
        return None
    from profilectl.formats.rocprof_compute import WORKLOAD_ROW, tool_facts
    row = next((r for r in rows if r.get("kernel") == WORKLOAD_ROW), None)
    if row is None:
        return None
    roofs = tool_facts()["speed_of_light"]

    def percent(metric: str) -> float | None:
        return _number(row.get(f"{metric} (% of peak)"))
    found = {roof: [v for m in roofs[roof] if (v := percent(m)) is not None] for roof in ("compute", "hbm", "l2")}
    utilisation = {roof: (sum(values) if roof == "hbm" else max(values)) for roof, values in found.items() if values}
    if "compute" not in utilisation or not ({"hbm", "l2"} & set(utilisation)):
        return None
    latency = float(rules().get("latency_percent", 60))
    verdict, bound_by = verdict_of(utilisation, LEVELS, latency)
    words = {"compute": "busiest compute pipe", "hbm": "HBM (L2-Fabric read + write)", "l2": "L2 cache"}
    figures = ", ".join(f"{words[k]} {v:.1f} %" for k, v in utilisation.items())
    return (f"rocprof-compute speed-of-light, {WORKLOAD_ROW}: {verdict}, carried by the {words[bound_by]} "
            f"({figures} of peak; under {latency:.0f} % on every roof is latency-bound)")
