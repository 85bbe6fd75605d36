"""rocprofv3 PC sampling output: <pid>_pc_sampling_host_trap.csv (ROCm 6.4+) and
<pid>_pc_sampling_stochastic.csv (7.0+, gfx94x/gfx950), read into samples per kernel and
instruction (the hotspot table) and, for stochastic sampling, per stall reason.

Columns (rocm-rel-7.0 source/lib/output/generateCSV.cpp L843-851 and L902-915): Sample_Timestamp,
Exec_Mask, Dispatch_Id, Instruction, Instruction_Comment, Correlation_Id; stochastic adds
Wave_Issued_Instruction, Instruction_Type, Stall_Reason, Wave_Count. A sample names its dispatch,
not its kernel: the kernel comes from the kernel trace written beside it (the pc-sampling preset
asks for --kernel-trace).
"""

from __future__ import annotations

from pathlib import Path

from profilectl.formats.common import read_csv
from profilectl.formats.reader import Reader
from profilectl.model.tables import Tables

METHODS = ("host_trap", "stochastic")
STALL_PREFIX = "ROCPROFILER_PC_SAMPLING_INSTRUCTION_NOT_ISSUED_REASON_"


def method_of(name: str) -> str | None:
    return next((m for m in METHODS if name.endswith(f"pc_sampling_{m}.csv")), None)


def dispatch_kernels(sample_file: Path, method: str) -> dict[str, str]:
    """Dispatch_Id -> Kernel_Name from the kernel trace of the same process, when it is there."""
    prefix = sample_file.name[: -len(f"pc_sampling_{method}.csv")]
    trace = sample_file.parent / f"{prefix}kernel_trace.csv"
    if not trace.exists():
        return {}
    return {row["Dispatch_Id"]: row["Kernel_Name"] for _, row in read_csv(trace, ("Dispatch_Id", "Kernel_Name"))}


class PcSamplingReader(Reader):
    kind = "rocprofv3-pc-sampling"

    def recognises(self, path: Path) -> bool:
        return method_of(path.name) is not None

    def read_file(self, path: Path) -> Tables:
        method = method_of(path.name) or ""
        kernels = dispatch_kernels(path, method)
        samples: dict[tuple[str, str, str], int] = {}
        stalls: dict[str, int] = {}
        for _, row in read_csv(path, ("Dispatch_Id", "Instruction")):
            kernel = kernels.get(row["Dispatch_Id"], f"dispatch {row['Dispatch_Id']}")
            key = (kernel, row["Instruction"] or "(not decoded)", row.get("Instruction_Comment") or "")
            samples[key] = samples.get(key, 0) + 1
            reason = row.get("Stall_Reason")
            if reason:
                short = reason.removeprefix(STALL_PREFIX).lower()
                stalls[short] = stalls.get(short, 0) + 1
        notes = () if kernels else (f"{path.name}: no kernel trace beside it; samples are named by dispatch",)
        return Tables(pc_samples=samples, stall_reasons=stalls, notes=notes)
